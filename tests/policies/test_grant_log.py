"""A grant's change log (who granted or revoked, when, why) and the preview of what a revocation refuses."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.services import create_agent
from policies import services
from policies.models import Grant, GrantEvent
from runs.grant_revocation import revocation_preview
from runs.models import ToolCall
from tests.conftest import login
from tests.runs.factories import grant, run_for

pytestmark = pytest.mark.django_db


def _call(run, name: str, verdict: str = "allow", **kwargs) -> ToolCall:
    return ToolCall.objects.create(
        run=run, call_id=f"c-{ToolCall.objects.count()}", name=name, verdict=verdict, **kwargs
    )


def test_granting_and_revoking_are_logged_with_the_reason(acme, tenant_admin):
    made = services.create_grant(tenant=acme, skill_pattern="docs.*", agent_role="support", granted_by=tenant_admin)
    services.revoke_grant(grant=made, revoked_by=tenant_admin, reason="the docs bot moved to its own role")
    services.revoke_grant(grant=made, revoked_by=tenant_admin, reason="twice")
    log = list(GrantEvent.objects.filter(grant_ref=made.pk).order_by("created_at", "pk"))
    assert [(e.action, e.actor_label, e.reason) for e in log] == [
        ("granted", "admin", ""),
        ("revoked", "admin", "the docs bot moved to its own role"),
    ]


def test_the_preview_lists_the_runs_only_this_grant_let_through(acme, globex):
    support, _ = create_agent(tenant=acme, name="support-bot", role="support")
    other_role, _ = create_agent(tenant=acme, name="billing-bot", role="billing")
    stranger, _ = create_agent(tenant=globex, name="support-bot", role="support")
    docs = grant(acme, "docs.*", granted_at=timezone.now() - timedelta(days=30))
    grant(acme, "docs.search")  # another grant still covers docs.search
    run = run_for(support)
    _call(run, "docs.read")
    _call(run, "docs.read")
    _call(run, "docs.search")  # covered by the other grant
    _call(run, "docs.delete", verdict="deny")  # refused anyway
    _call(run_for(support), "docs.read", created_at=timezone.now() - timedelta(days=9))  # too old
    _call(run_for(other_role), "docs.read")  # another role
    _call(run_for(stranger), "docs.read")  # another tenant
    preview = revocation_preview(docs)
    assert [(r.run_id, r.agent, r.skills, r.calls) for r in preview.runs] == [
        (str(run.pk), "support-bot", ["docs.read"], 2)
    ]
    assert preview.agents == ["support-bot"] and preview.calls == 2 and not preview.truncated


def test_the_preview_is_one_query_for_the_calls(acme, django_assert_num_queries):
    docs = grant(acme, "docs.*")
    with django_assert_num_queries(2):  # the covered calls (bounded), the role's other grants
        revocation_preview(docs)


def test_the_grant_page_shows_the_preview_then_the_revocation_and_its_log(client, acme, tenant_admin):
    made = services.create_grant(tenant=acme, skill_pattern="docs.*", agent_role="support", granted_by=tenant_admin)
    support, _ = create_agent(tenant=acme, name="support-bot", role="support")
    _call(run_for(support), "docs.read")
    login(client, tenant_admin)
    page = client.get(reverse("grants:grant_detail", args=["acme", made.pk]))
    assert page.status_code == 200
    assert b"would have refused 1 call" in page.content and b"support-bot" in page.content
    refused = client.post(reverse("policies:grant_revoke", args=["acme", made.pk]), {"reason": "  "})
    assert refused.status_code == 302 and Grant.objects.get().revoked_at is None
    done = client.post(reverse("policies:grant_revoke", args=["acme", made.pk]), {"reason": "bot retired"}, follow=True)
    assert Grant.objects.get().revoked_at is not None
    assert b"bot retired" in done.content and b"Revoke grant" not in done.content


def test_the_grant_page_is_a_get(client, acme, tenant_admin):
    login(client, tenant_admin)
    assert client.post(reverse("grants:grant_detail", args=["acme", grant(acme, "docs.*").pk])).status_code == 405


def test_another_tenants_admin_gets_404_and_a_viewer_403(client, acme, globex, outsider, viewer, tenant_admin):
    made = services.create_grant(tenant=acme, skill_pattern="docs.*", agent_role="support", granted_by=tenant_admin)
    page = reverse("grants:grant_detail", args=["acme", made.pk])
    revoke = reverse("policies:grant_revoke", args=["acme", made.pk])
    login(client, outsider)  # an admin of globex
    assert client.get(page).status_code == 404
    assert client.post(revoke, {"reason": "mine now"}).status_code == 404
    assert client.get(reverse("grants:grant_detail", args=["globex", made.pk])).status_code == 404
    login(client, viewer)
    assert client.get(page).status_code == 403
    assert client.post(revoke, {"reason": "why not"}).status_code == 403
    assert Grant.objects.get().revoked_at is None and GrantEvent.objects.count() == 1


def test_the_api_revocation_keeps_its_reason(acme, tenant_admin):
    from rest_framework.test import APIClient

    made = services.create_grant(tenant=acme, skill_pattern="docs.*", agent_role="support", granted_by=tenant_admin)
    api = APIClient()
    api.force_authenticate(tenant_admin)
    url = reverse("policies_api:grant_revoke", args=[made.pk])
    assert api.post(url, {"reason": "x" * 501}, format="json").status_code == 400
    assert api.post(url, {"reason": "rotated to a narrower grant"}, format="json").status_code == 200
    assert GrantEvent.objects.get(action="revoked").reason == "rotated to a narrower grant"
