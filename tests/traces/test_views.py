import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.models import Role
from tests.conftest import make_user
from tests.traces.conftest import make_run
from traces.models import AlertRule, Span, TraceSettings
from traces.recording import ensure_trace, record_span
from traces.timeline import PAGE_SIZE

pytestmark = pytest.mark.django_db


def seed(run, n=3, skill="billing.create_refund"):
    start = timezone.now()
    root = record_span(run=run, kind="run", name="run", started_at=start, ended_at=start + timedelta(seconds=1))
    for i in range(n):
        record_span(
            run=run,
            kind="tool_call",
            name=skill,
            started_at=start + timedelta(milliseconds=10 * i),
            ended_at=start + timedelta(milliseconds=10 * i + 5),
            parent_span_id=root.span_id,
            skill_name=skill,
            verdict="allow",
            outcome="succeeded",
            attributes={"gen_ai.tool.call.arguments": {"order": i, "email": "ann@example.com"}},
        )
    return ensure_trace(run)


def test_members_see_their_tenants_traces_and_outsiders_see_nothing(client, viewer, outsider, run):
    trace = seed(run)
    client.force_login(viewer)
    page = client.get(reverse("traces:list"))
    assert page.status_code == 200 and trace.trace_id in page.content.decode()
    detail = client.get(reverse("traces:detail", args=[trace.pk]))
    assert detail.status_code == 200 and "billing.create_refund" in detail.content.decode()
    client.force_login(outsider)
    assert trace.trace_id not in client.get(reverse("traces:list")).content.decode()
    assert client.get(reverse("traces:detail", args=[trace.pk])).status_code == 404
    span = Span.objects.filter(trace=trace).first()
    assert client.get(reverse("traces:span", args=[trace.pk, span.span_id])).status_code == 404


def test_skill_owners_see_their_skills_spans_in_other_tenants_redacted(
    client, globex, owner_team, owned_skill, snapshot
):
    from console.services import create_agent

    globex_agent, _ = create_agent(tenant=globex, name="gx", role="support")
    run = make_run(tenant=globex, agent=globex_agent, snapshot=snapshot, end_user="carol@globex.example")
    trace = seed(run)
    record_span(run=run, kind="tool_call", name="crm.lookup", started_at=timezone.now(), skill_name="crm.lookup")
    owner_elsewhere = make_user("gx-owner")
    owner_team.members.add(owner_elsewhere)
    client.force_login(owner_elsewhere)
    assert trace.trace_id in client.get(reverse("traces:list")).content.decode()
    page = client.get(reverse("traces:detail", args=[trace.pk])).content.decode()
    assert "billing.create_refund" in page and "crm.lookup" not in page
    assert "carol@globex.example" not in page
    tool = Span.objects.filter(trace=trace, skill_name="billing.create_refund").first()
    panel = client.get(reverse("traces:span", args=[trace.pk, tool.span_id])).content.decode()
    assert "ann@example.com" not in panel and "redacted" in panel
    other = Span.objects.get(trace=trace, skill_name="crm.lookup")
    assert client.get(reverse("traces:span", args=[trace.pk, other.span_id])).status_code == 404


def test_list_filters_and_cursor_pagination(client, viewer, acme, agent, snapshot, settings):
    for i in range(55):
        run = make_run(tenant=acme, agent=agent, snapshot=snapshot, end_user=f"user{i}@x")
        record_span(
            run=run,
            kind="tool_call",
            name="t",
            started_at=timezone.now() - timedelta(minutes=i),
            skill_name="crm.lookup" if i % 2 else "billing.create_refund",
            verdict="deny" if i == 7 else "allow",
            error_class="timeout" if i == 8 else "",
        )
    client.force_login(viewer)
    first = client.get(reverse("traces:list"))
    assert len(first.context["rows"]) == 50 and first.context["next_url"]
    second = client.get(reverse("traces:list") + first.context["next_url"])
    assert len(second.context["rows"]) == 5
    seen = {r["trace"].pk for r in first.context["rows"]} | {r["trace"].pk for r in second.context["rows"]}
    assert len(seen) == 55
    assert len(client.get(reverse("traces:list"), {"verdict": "deny"}).context["rows"]) == 1
    assert len(client.get(reverse("traces:list"), {"error_class": "timeout"}).context["rows"]) == 1
    assert len(client.get(reverse("traces:list"), {"skill": "crm.lookup"}).context["rows"]) == 27
    assert len(client.get(reverse("traces:list"), {"end_user": "user3@x"}).context["rows"]) == 1
    assert len(client.get(reverse("traces:list"), {"agent": "support-bot", "tenant": "acme"}).context["rows"]) == 50


def _bulk_spans(trace, n):
    start = trace.started_at
    root = Span.objects.create(
        trace=trace, span_id="f" * 16, kind="run", name="root", started_at=start, ended_at=start + timedelta(seconds=n)
    )
    Span.objects.bulk_create(
        [
            Span(
                trace=trace,
                span_id=f"{i + 1:016x}",
                parent_span_id=root.span_id,
                kind="tool_call",
                name=f"call {i}",
                started_at=start + timedelta(seconds=i),
                ended_at=start + timedelta(seconds=i, milliseconds=500),
                error_class="timeout" if i % 97 == 0 else "",
                attributes={"i": i},
            )
            for i in range(n - 1)
        ]
    )


def test_timeline_query_count_does_not_grow_with_spans_and_pages_5000(client, viewer, run, acme, agent, snapshot):
    client.force_login(viewer)
    small = ensure_trace(run)
    _bulk_spans(small, 10)
    with CaptureQueriesContext(connection) as small_q:
        client.get(reverse("traces:detail", args=[small.pk]))
    big = ensure_trace(make_run(tenant=acme, agent=agent, snapshot=snapshot))
    _bulk_spans(big, 5000)
    with CaptureQueriesContext(connection) as big_q:
        response = client.get(reverse("traces:detail", args=[big.pk]))
    assert len(big_q) == len(small_q) <= 10  # 3 of them are the trace, access and span rows
    html = response.content.decode()
    assert html.count('class="tl-row') == PAGE_SIZE and f"offset={PAGE_SIZE}" in html
    more = client.get(reverse("traces:detail", args=[big.pk]), {"offset": 4900}, HTTP_HX_REQUEST="true")
    assert more.content.decode().count('class="tl-row') == 100 and "<html" not in more.content.decode()


def test_span_panel_links_an_approval_to_its_request(client, viewer, run):
    span = record_span(
        run=run,
        kind="approval",
        name="approval.requested",
        started_at=timezone.now(),
        verdict="confirm",
        attributes={"approval_id": 41},
    )
    client.force_login(viewer)
    trace = ensure_trace(run)
    panel = client.get(reverse("traces:span", args=[trace.pk, span.span_id])).content.decode()
    assert reverse("approvals:detail", args=[41]) in panel
    timeline = client.get(reverse("traces:detail", args=[trace.pk])).content.decode()
    assert reverse("approvals:detail", args=[41]) in timeline


def test_settings_page_roles_methods_and_sealed_headers(client, tenant_admin, viewer, outsider, acme):
    url = reverse("traces:settings", args=["acme"])
    client.force_login(tenant_admin)
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "retention_days": 7,
            "forward_enabled": "on",
            "forward_endpoint": "http://127.0.0.1:4318/v1/traces",
            "forward_headers": "Authorization: Bearer collector-secret-token-123",
        },
    )
    assert response.status_code == 302
    acme.refresh_from_db()
    saved = TraceSettings.objects.get(tenant=acme)
    assert acme.trace_retention == timedelta(days=7) and saved.forward_enabled
    assert "collector-secret-token-123" not in saved.forward_headers_sealed
    assert client.post(url, {"retention_days": 0}).status_code == 400
    assert client.put(url).status_code == 405
    client.force_login(viewer)
    assert client.post(url, {"retention_days": 7}).status_code == 403
    client.force_login(outsider)
    assert client.post(url, {"retention_days": 7}).status_code == 404


def test_alert_rules_on_the_skill_page(client, owner, viewer, outsider, owned_skill):
    create = reverse("traces:rule_create", args=[owned_skill.name])
    client.force_login(owner)
    assert client.get(reverse("traces:skill", args=[owned_skill.name])).status_code == 200
    response = client.post(create, {"kind": "error_rate", "threshold": 0.2, "window": "1h", "min_calls": 5})
    assert response.status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.skill_name, rule.threshold, rule.window) == (owned_skill.name, 0.2, timedelta(hours=1))
    assert client.get(create).status_code == 405
    client.force_login(viewer)  # a member of the tenant, not of the owning team
    assert client.post(create, {"kind": "error_rate", "threshold": 0.2, "window": "1h"}).status_code == 404
    assert client.get(reverse("traces:skill", args=[owned_skill.name])).status_code == 404
    client.force_login(outsider)
    assert client.post(reverse("traces:rule_delete", args=[rule.pk])).status_code == 404
    client.force_login(owner)
    assert client.post(reverse("traces:rule_delete", args=[rule.pk])).status_code == 302
    assert not AlertRule.objects.exists()
    assert client.get(reverse("traces:alerts")).status_code == 200


def test_skill_page_numbers(client, owner, run, owned_skill):
    start = timezone.now() - timedelta(minutes=30)
    for i in range(10):
        record_span(
            run=run,
            kind="tool_call",
            name=owned_skill.name,
            started_at=start + timedelta(seconds=i),
            ended_at=start + timedelta(seconds=i, milliseconds=100 * (i + 1)),
            skill_name=owned_skill.name,
            verdict="confirm" if i < 2 else "allow",
            error_class="timeout" if i >= 8 else "",
            attributes={"airlock.arguments.sha256": "a" * 64 if i < 3 else f"{i:064d}", "airlock.result.bytes": 1000},
        )
    client.force_login(owner)
    m = client.get(reverse("traces:skill", args=[owned_skill.name]), {"window": "1h"}).context["m"]
    assert (m.calls, m.errors, m.errors_by_class) == (10, 2, [("timeout", 2)])
    assert m.confirm_rate == pytest.approx(0.2) and m.max_repeats == 3 and m.repeated_extra_calls == 2
    assert m.p50_ms == pytest.approx(500, abs=101) and m.p95_ms == pytest.approx(1000)
    assert m.result_bytes == 10_000 and m.context_share == 1.0


def test_unrelated_member_of_another_role_cannot_see_settings_or_skill(client, acme):
    approver_only = make_user("appr-only", tenant=acme, roles=[Role.APPROVER])
    client.force_login(approver_only)
    assert client.get(reverse("traces:settings", args=["acme"])).status_code == 403
    assert json  # keep import used for future payload checks


def test_run_link_redirects_to_its_trace(client, viewer, outsider, run):
    trace = seed(run)
    client.force_login(viewer)
    response = client.get(reverse("traces:for_run", args=[run.id]))
    assert response.status_code == 302 and response["Location"] == reverse("traces:detail", args=[trace.pk])
    client.force_login(outsider)
    assert client.get(reverse("traces:for_run", args=[run.id])).status_code == 404
