"""Uploading calls the SDK decided locally (POST /api/v1/runs/{id}/local-calls), written as the people who
would abuse it: another agent, another tenant, a forger of server-side calls, a replayer, a flooder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent, revoke_agent
from policies.bundles import bundle_for
from policies.services import set_local_decisions
from runs import local_calls
from runs.models import LocalDecision, ToolCall
from tests.runs.conftest import start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span

pytestmark = pytest.mark.django_db


@pytest.fixture
def skills(acme, owner_team):
    owner_team.email = "support-tools@example.com"
    owner_team.save()
    make_skill("crm.lookup_local", adapter="client:crm.lookup_local", publish=False)
    make_skill("crm.note_local", effect="write", adapter="client:crm.note_local", publish=False)
    make_skill("crm.server_side", publish=True)
    grant(acme, "crm.*")


def spooled(call_id: str, skill: str = "crm.lookup_local", *, at: datetime | None = None, **extra) -> dict:
    decided = at or datetime.now(UTC) - timedelta(seconds=30)
    body = {
        "call_id": call_id,
        "skill": skill,
        "version": "1.0.0",
        "arguments": {"customer": "c-1"},
        "verdict": "allow",
        "reason": "allowed by bundle",
        "bundle_number": 1,
        "decided_at": decided.isoformat(),
        "status": "succeeded",
        "result": {"name": "Ada"},
        "error": None,
        "finished_at": (decided + timedelta(milliseconds=40)).isoformat(),
        "sequence": 1,
    }
    body.update(extra)
    return body


def upload(client, run_id: str, calls):
    return client.post(reverse("runs_api:local_calls", args=[run_id]), {"calls": calls}, format="json")


@pytest.fixture
def run_id(acme, skills, agent, agent_client) -> str:
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="a")
    assert bundle_for(agent).body["number"] == 1  # the bundle the spooled calls below were decided under
    return start_run(agent_client)["run_id"]


def test_an_upload_records_each_call_once_at_its_real_time_with_its_span(agent_client, run_id):
    first = datetime.now(UTC) - timedelta(seconds=50)
    calls = [
        spooled("l-1", at=first, sequence=1),
        spooled("l-2", "crm.note_local", at=first + timedelta(seconds=5), sequence=2, arguments={"text": "hi"}),
    ]
    response = upload(agent_client, run_id, calls)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["recorded"], body["refused"]) == (2, 0)
    assert [a["status"] for a in body["results"]] == ["recorded", "recorded"]
    assert body["results"][0] == {
        "call_id": "l-1",
        "status": "recorded",
        "call_status": "succeeded",
        "bundle_number": 1,
        "flagged": False,
    }
    again = upload(agent_client, run_id, calls)
    assert again.json() == body  # idempotent: answered as the first time, nothing added
    recorded = list(ToolCall.objects.filter(run_id=run_id).order_by("created_at"))
    assert [c.call_id for c in recorded] == ["l-1", "l-2"]
    assert recorded[0].created_at == first and recorded[0].verdict == "allow"
    assert recorded[0].result["content"] == {"name": "Ada"}
    assert recorded[0].decision["local"]["bundle_number"] == 1
    spans = list(Span.objects.filter(call__run_id=run_id).order_by("started_at"))
    assert len(spans) == 2
    assert spans[0].name == "crm.lookup_local (decided locally under bundle 1)"
    assert spans[0].started_at == first and spans[0].attributes["airlock.decided_locally"] is True
    detail = agent_client.get(reverse("runs_api:run_detail", args=[run_id])).json()
    assert [c["call_id"] for c in detail["calls"]] == ["l-1", "l-2"]


def test_arguments_and_results_are_redacted_before_storage(agent_client, run_id):
    secret = "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    response = upload(
        agent_client, run_id, [spooled("l-1", arguments={"token": secret}, result={"api_key": secret, "ok": 1})]
    )
    assert response.json()["recorded"] == 1
    call = ToolCall.objects.get(run_id=run_id, call_id="l-1")
    assert secret not in str(call.arguments) and secret not in str(call.result)
    assert secret not in str(Span.objects.get(call=call).attributes)


def test_a_call_id_replayed_with_other_arguments_is_refused_and_changes_nothing(agent_client, run_id):
    upload(agent_client, run_id, [spooled("l-1")])
    response = upload(agent_client, run_id, [spooled("l-1", arguments={"customer": "c-2"})])
    answer = response.json()["results"][0]
    assert answer["status"] == "refused" and answer["error"]["code"] == "call_id_conflict"
    assert ToolCall.objects.get(run_id=run_id, call_id="l-1").arguments == {"customer": "c-1"}
    assert Span.objects.filter(call__run_id=run_id).count() == 1


def test_a_gate_call_id_cannot_be_overwritten_by_an_upload(agent_client, run_id):
    agent_client.post(
        reverse("runs_api:run_calls", args=[run_id]),
        {"calls": [{"call_id": "g-1", "name": "crm.server_side", "arguments": {}}]},
        format="json",
    )
    answer = upload(agent_client, run_id, [spooled("g-1")]).json()["results"][0]
    assert answer["error"]["code"] == "call_id_conflict"


def test_a_forged_call_of_a_server_side_skill_is_refused_and_the_good_calls_still_recorded(agent_client, run_id):
    response = upload(agent_client, run_id, [spooled("l-1"), spooled("forged", "crm.server_side"), spooled("l-2")])
    body = response.json()
    assert response.status_code == 200 and (body["recorded"], body["refused"]) == (2, 1)
    refused = body["results"][1]
    assert refused == {"call_id": "forged", "status": "refused", "error": refused["error"]}
    assert refused["error"]["code"] == "not_client_executed" and refused["error"]["class"] == "authorization"
    assert set(ToolCall.objects.filter(run_id=run_id).values_list("call_id", flat=True)) == {"l-1", "l-2"}


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"skill": "crm.nowhere"}, "unknown_skill"),
        ({"verdict": "confirm"}, "not_allowed_locally"),
        ({"bundle_number": 0}, "malformed_local_call"),
        ({"bundle_number": "3"}, "malformed_local_call"),
        ({"status": "running"}, "malformed_local_call"),
        ({"decided_at": "yesterday"}, "invalid_time"),
        ({"decided_at": "2026-01-01T10:00:00"}, "invalid_time"),
        ({"decided_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}, "time_in_future"),
        ({"decided_at": (datetime.now(UTC) - timedelta(days=2)).isoformat()}, "decided_before_run"),
        ({"finished_at": (datetime.now(UTC) - timedelta(hours=1)).isoformat()}, "finished_before_decided"),
        ({"finished_at": None}, "invalid_time"),
        ({"arguments": ["not", "an", "object"]}, "malformed_local_call"),
        ({"call_id": ""}, "malformed_local_call"),
        ({"run_id": "00000000-0000-0000-0000-000000000000"}, "wrong_run"),
        ({"result": {"n": 2**60}}, "malformed_local_call"),
    ],
)
def test_bad_calls_get_a_typed_refusal_each(agent_client, run_id, change, code):
    response = upload(agent_client, run_id, [{**spooled("bad"), **change}, spooled("good")])
    assert response.status_code == 200
    bad, good = response.json()["results"]
    assert bad["status"] == "refused" and bad["error"]["code"] == code, bad
    assert good["status"] == "recorded"


def test_a_call_repeated_within_one_upload_is_refused_once(agent_client, run_id):
    bad = upload(agent_client, run_id, [spooled("l-1"), spooled("l-1")]).json()["results"][1]
    assert bad["error"]["code"] == "duplicate_call_id"


def test_a_bundle_number_never_issued_is_refused(agent_client, run_id):
    answers = upload(agent_client, run_id, [spooled("l-1", bundle_number=2), spooled("l-2", bundle_number=1)])
    first, second = answers.json()["results"]
    assert first["error"]["code"] == "unknown_bundle" and second["status"] == "recorded"


def test_an_agent_never_issued_a_bundle_cannot_claim_one(acme, skills):
    agent, key = create_agent(tenant=acme, name="bundleless-bot", role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    run_id = start_run(client)["run_id"]
    answer = upload(client, run_id, [spooled("l-1", bundle_number=1)]).json()["results"][0]
    assert answer["error"]["code"] == "unknown_bundle"


def test_a_flood_in_one_upload_is_refused_whole_with_the_limit(agent_client, run_id):
    calls = [spooled(f"l-{i}", sequence=i) for i in range(local_calls.MAX_UPLOAD + 1)]
    response = upload(agent_client, run_id, calls)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "too_many_calls"
    assert response.json()["error"]["limit"] == local_calls.MAX_UPLOAD
    assert not ToolCall.objects.filter(run_id=run_id).exists()


@pytest.mark.parametrize("body", ['{"calls": [', "[]", '{"calls": {}}', '{"calls": []}', '"text"'])
def test_malformed_bodies_get_a_typed_400(agent_client, run_id, body):
    response = agent_client.post(reverse("runs_api:local_calls", args=[run_id]), body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["class"] == "validation"


def test_another_agent_of_the_same_tenant_cannot_upload_into_the_run(acme, agent_client, run_id):
    _, key = create_agent(tenant=acme, name="other-bot", role="support")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert upload(other, run_id, [spooled("l-1")]).status_code == 404
    assert not ToolCall.objects.filter(run_id=run_id).exists()


def test_another_tenants_agent_cannot_upload_into_the_run(outsider_agent_client, run_id):
    assert upload(outsider_agent_client, run_id, [spooled("l-1")]).status_code == 404
    assert not ToolCall.objects.filter(run_id=run_id).exists()


def test_a_person_cannot_upload_with_a_session(client, tenant_admin, run_id):
    client.force_login(tenant_admin)
    response = client.post(
        reverse("runs_api:local_calls", args=[run_id]), {"calls": [spooled("l-1")]}, content_type="application/json"
    )
    assert response.status_code in (401, 403)


def test_a_revoked_agent_uploads_what_it_decided_before_and_what_came_after_is_flagged(
    agent, agent_client, run_id, tenant_admin
):
    before = datetime.now(UTC) - timedelta(seconds=40)
    revoke_agent(agent=agent)
    after = datetime.now(UTC) + timedelta(seconds=1)
    response = upload(agent_client, run_id, [spooled("l-1", at=before), spooled("l-2", at=after, sequence=2)])
    assert response.status_code == 200, response.content
    first, second = response.json()["results"]
    assert first["flagged"] is False
    assert second["flagged"] is True
    assert "key was revoked" in LocalDecision.objects.get(call__call_id="l-2").flag_reason
    # the revoked key still reaches nothing else
    assert agent_client.get(reverse("runs_api:run_detail", args=[run_id])).status_code == 401


def test_a_policy_changed_during_the_outage_flags_the_call_and_tells_owners_and_admins(
    agent_client, run_id, tenant_admin, django_capture_on_commit_callbacks
):
    published_policy([rule("no-notes", "deny", 'skill.name == "crm.note_local"', "notes are frozen")])
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(agent_client, run_id, [spooled("l-1"), spooled("l-2", "crm.note_local", sequence=2)])
    first, second = response.json()["results"]
    assert first["flagged"] is False and second["flagged"] is True
    local = LocalDecision.objects.get(call__call_id="l-2")
    assert local.flag_verdict == "deny" and "notes are frozen" in local.flag_reason
    span = Span.objects.get(call=local.call)
    assert span.attributes["airlock.local.flagged"] is True
    recipients = sorted(address for message in mail.outbox for address in message.to)
    assert recipients == ["admin@example.com", "support-tools@example.com"]
    assert all("crm.note_local" in message.subject for message in mail.outbox)


def test_a_confirm_under_todays_policy_is_flagged_too(agent_client, run_id):
    published_policy([rule("ask", "confirm", 'skill.name == "crm.lookup_local"')])
    assert upload(agent_client, run_id, [spooled("l-1")]).json()["results"][0]["flagged"] is True
    assert LocalDecision.objects.get(call__call_id="l-1").flag_verdict == "confirm"


def test_a_grant_revoked_during_the_outage_flags_the_call(acme, agent_client, run_id):
    from policies.models import Grant

    Grant.objects.filter(tenant=acme).delete()
    assert upload(agent_client, run_id, [spooled("l-1")]).json()["results"][0]["flagged"] is True


def test_a_call_whose_process_died_is_recorded_as_an_unknown_outcome(agent_client, run_id):
    answer = upload(agent_client, run_id, [spooled("l-1", status="decided", result=None, finished_at=None)])
    assert answer.json()["results"][0]["call_status"] == "failed"
    call = ToolCall.objects.get(run_id=run_id, call_id="l-1")
    assert call.result["error"]["code"] == "local_outcome_unknown"


def test_a_failed_local_call_keeps_its_error_masked(agent_client, run_id):
    upload(agent_client, run_id, [spooled("l-1", status="failed", result=None, error={"message": "crm down"})])
    call = ToolCall.objects.get(run_id=run_id, call_id="l-1")
    assert call.status == "failed" and call.result["error"]["message"] == "crm down"


def test_the_run_page_trace_and_why_panel_show_the_local_calls_and_the_flag(client, viewer, agent_client, run_id):
    from traces.models import Trace

    published_policy([rule("no-notes", "deny", 'skill.name == "crm.note_local"', "notes are frozen")])
    upload(agent_client, run_id, [spooled("l-1"), spooled("l-2", "crm.note_local", sequence=2)])
    client.force_login(viewer)
    page = client.get(reverse("runs:run_detail", args=[run_id])).content.decode()
    assert page.count("decided locally · bundle 1") == 2
    assert "flagged: now deny" in page and "notes are frozen" in page
    trace = Trace.objects.get(run_id=run_id)
    timeline = client.get(reverse("traces:detail", args=[trace.pk])).content.decode()
    assert "crm.note_local (decided locally under bundle 1)" in timeline and "flagged: now deny" in timeline
    call = ToolCall.objects.get(run_id=run_id, call_id="l-2")
    assert client.get(reverse("traces:why", args=[trace.pk, call.pk])).status_code == 200


def test_admins_find_flagged_local_calls_in_the_run_list_and_outsiders_see_none(
    client, tenant_admin, outsider, agent_client, run_id, skills
):
    clean_run = start_run(agent_client)["run_id"]
    published_policy([rule("ask", "confirm", 'skill.name == "crm.lookup_local"')])
    upload(agent_client, run_id, [spooled("l-1")])
    client.force_login(tenant_admin)
    listed = client.get(reverse("runs:run_list"), {"flagged": "1"}).content.decode()
    assert run_id in listed and clean_run not in listed
    client.force_login(outsider)
    assert run_id not in client.get(reverse("runs:run_list"), {"flagged": "1"}).content.decode()
    assert client.get(reverse("runs:run_detail", args=[run_id])).status_code == 404
