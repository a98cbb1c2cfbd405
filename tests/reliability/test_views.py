"""Console pages: reconciliation inbox and resolution, tenant credentials, MCP servers, skill page section."""

import pytest
from django.urls import reverse

from reliability.models import Credential, McpServer, ReconciliationItem
from reliability.reconcile import open_reconciliation
from reliability.services import save_credential
from runs.models import CallStatus, RunEvent, ToolCall
from runs.plane import breakers
from tests.conftest import login
from tests.reliability.conftest import skill
from tests.runs.factories import run_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(agent, owner_team):
    version = skill("billing.refund", "https://billing.example.com/refund", effect="write")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="views test")
    run = run_for(agent)
    call = ToolCall.objects.create(
        run=run,
        call_id="c1",
        name="billing.refund",
        skill_version=version,
        effect="write",
        status=CallStatus.TIMEOUT_UNKNOWN,
        idempotency_key=f"{run.pk}:c1",
        arguments={"cents": 500},
    )
    return open_reconciliation(call=call, reason="timeout")


def resolve(client, item, **data):
    return client.post(
        reverse("reliability:reconciliation_resolve", args=[item.pk]),
        {"resolution": "failed", "note": "Checked the billing console: no refund.", **data},
    )


def test_list_and_detail_show_the_tenants_items(client, viewer, item):
    login(client, viewer)
    page = client.get(reverse("reliability:reconciliation_list"))
    assert page.status_code == 200 and b"billing.refund" in page.content
    detail = client.get(reverse("reliability:reconciliation_detail", args=[item.pk]))
    assert detail.status_code == 200 and b"owners or a tenant admin" in detail.content


def test_owner_resolves_and_the_call_run_and_trace_learn_it(client, owner, item):
    login(client, owner)
    response = resolve(client, item)
    assert response.status_code == 302
    item.refresh_from_db()
    assert item.resolution == "failed" and item.resolved_by == owner and not item.is_open
    call = item.call
    call.refresh_from_db()
    assert call.status == CallStatus.RECONCILED and call.result["error"]["code"] == "did_not_take_effect"
    assert RunEvent.objects.get(run=item.run, kind="call.completed").payload["call_id"] == "c1"
    assert item.run.trace.spans.filter(outcome="reconciled").exists()
    assert resolve(client, item, resolution="succeeded").status_code == 302  # second decision: refused politely
    item.refresh_from_db()
    assert item.resolution == "failed"


def test_tenant_admin_may_resolve(client, tenant_admin, item):
    login(client, tenant_admin)
    assert resolve(client, item, resolution="succeeded").status_code == 302
    assert ReconciliationItem.objects.get().resolution == "succeeded"


def test_resolve_wrong_method_outsider_and_member_without_role(client, outsider, viewer, item):
    login(client, viewer)
    assert client.get(reverse("reliability:reconciliation_resolve", args=[item.pk])).status_code == 405
    assert resolve(client, item).status_code == 403
    login(client, outsider)
    assert resolve(client, item).status_code == 404
    assert client.get(reverse("reliability:reconciliation_detail", args=[item.pk])).status_code == 404
    assert b"billing.refund" not in client.get(reverse("reliability:reconciliation_list")).content
    assert ReconciliationItem.objects.get().is_open


def test_credentials_page_saves_sealed_and_never_shows_the_value(client, tenant_admin, acme):
    login(client, tenant_admin)
    url = reverse("reliability:credential_list", args=["acme"])
    response = client.post(
        url, {"name": "zendesk_token", "value": "s3cr3t-value", "header": "Authorization", "scheme": "Bearer"}
    )
    assert response.status_code == 302
    page = client.get(url)
    assert b"zendesk_token" in page.content and b"s3cr3t-value" not in page.content
    assert "s3cr3t-value" not in Credential.objects.get().sealed_value


def test_credentials_wrong_method_outsider_and_member_without_role(client, viewer, outsider, acme):
    url = reverse("reliability:credential_list", args=["acme"])
    login(client, viewer)
    assert client.get(url).status_code == 403
    assert client.post(url, {"name": "x", "value": "y"}).status_code == 403
    login(client, outsider)
    assert client.get(url).status_code == 404
    assert client.put(url).status_code == 405


def test_credential_delete(client, tenant_admin, viewer, outsider, acme):
    credential = save_credential(tenant=acme, name="zendesk_token", value="v")
    url = reverse("reliability:credential_delete", args=["acme", credential.pk])
    login(client, outsider)
    assert client.post(url).status_code == 404
    login(client, viewer)
    assert client.post(url).status_code == 403
    login(client, tenant_admin)
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 302
    assert not Credential.objects.exists()


def test_mcp_servers_page_is_for_platform_admins(client, platform_admin, tenant_admin):
    url = reverse("reliability:mcp_server_list")
    login(client, tenant_admin)
    assert client.get(url).status_code == 403
    login(client, platform_admin)
    response = client.post(
        url, {"name": "desk", "transport": "http", "url": "https://mcp.example.com/mcp", "headers": "X-Api-Key: abc123"}
    )
    assert response.status_code == 302
    page = client.get(url)
    assert b"mcp.example.com" in page.content and b"abc123" not in page.content
    assert McpServer.objects.get().headers() == {"X-Api-Key": "abc123"}
    assert client.delete(url).status_code == 405


def test_skill_page_shows_breaker_state(client, owner, item):
    domain = breakers.domain_for("https://billing.example.com/refund")
    for _ in range(5):
        breakers.record_failure(domain, breakers.Admission("closed", probe=False), reason="test")
    login(client, owner)
    page = client.get(reverse("traces:skill", args=["billing.refund"]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Circuit breakers" in text and "https://billing.example.com" in text and ">open<" in text
    assert "1 unknown outcome to reconcile" in text
