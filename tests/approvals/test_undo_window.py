"""The undo window (`risk.delay_seconds`): an approved call of such a skill is `scheduled`, the agent sees it
pending, any approver who could decide it may cancel it until it runs, and it then runs once or never."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import services
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tasks import resume_call
from console.services import create_personal_token
from runs.models import CallStatus, RunEvent, RunStatus
from tests.approvals.factories import REFUND_SCHEMA, open_request
from tests.approvals.gate_world import create_active_version, downstream_manifest
from tests.conftest import login
from traces.models import Span

pytestmark = pytest.mark.django_db

_versions = itertools.count(1)
WINDOW = 30


def delayed_version(seconds: int = WINDOW, name: str = "billing.send_payout"):
    """An active skill whose approved calls wait `seconds` before they run."""
    body = downstream_manifest(
        name, schema=REFUND_SCHEMA, version=f"2.0.{next(_versions)}", team_slug="billing-platform"
    )
    body["risk"]["delay_seconds"] = seconds
    return create_active_version(body)


@pytest.fixture
def scheduled(acme, agent, approver, clock):
    request = open_request(tenant=acme, agent=agent, skill_version=delayed_version())
    assert request.delay_seconds == WINDOW
    services.decide_approval(approval=request, user=approver, decision="approve")
    request.refresh_from_db()
    return request


def _api(user) -> APIClient:
    _, key = create_personal_token(user=user, name="script")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.parametrize(("seconds", "accepted"), [(0, True), (30, True), (86400, True), (-1, False), (86401, False)])
def test_a_manifest_bounds_its_undo_window(seconds, accepted):
    from registry.validation import _schema_errors
    from tests.runs.factories import manifest

    body = manifest("billing.send_payout", effect="write")
    body["risk"]["delay_seconds"] = seconds
    errors = _schema_errors(body)
    assert (errors == []) is accepted, errors
    if not accepted:
        assert errors[0]["path"] == "$.risk.delay_seconds"


def test_a_window_given_as_text_is_refused_by_name():
    from registry.validation import _schema_errors
    from tests.runs.factories import manifest

    body = manifest("billing.send_payout", effect="write")
    body["risk"]["delay_seconds"] = "30s"
    [error] = _schema_errors(body)
    assert error["path"] == "$.risk.delay_seconds" and "is not of type 'integer'" in error["message"]


def test_an_approved_call_waits_out_its_window_then_runs_once(scheduled, clock, executions):
    assert scheduled.status == ApprovalStatus.SCHEDULED and scheduled.decision_word == "approved"
    assert abs((scheduled.scheduled_for - clock.now()).total_seconds() - WINDOW) < 5
    actions = list(scheduled.events.values_list("action", flat=True))
    assert actions == ["requested", "approved", "scheduled"]
    decided = RunEvent.objects.get(run=scheduled.call.run, kind="approval.decided").payload
    assert decided["decision"] == "approved" and decided["runs_at"] == scheduled.scheduled_for.isoformat()
    scheduled.call.refresh_from_db()
    assert scheduled.call.status == CallStatus.AWAITING_APPROVAL  # the agent sees it pending, as before

    resume_call.run(scheduled.pk)  # a task delivered early acts on nothing
    scheduled.refresh_from_db()
    assert scheduled.status == ApprovalStatus.SCHEDULED and executions == []

    clock.advance(WINDOW + 1)
    resume_call.run(scheduled.pk)
    resume_call.run(scheduled.pk)  # a re-delivery
    scheduled.refresh_from_db()
    assert scheduled.status == ApprovalStatus.EXECUTED and len(executions) == 1
    assert [e["from_status"] for e in scheduled.events.filter(action="executing").values("from_status")] == [
        "scheduled"
    ]
    names = set(Span.objects.filter(trace__run_id=scheduled.call.run_id).values_list("name", flat=True))
    assert {"approval.scheduled", "approval.resumed"} <= names


def test_another_approver_cancels_it_in_the_window_and_it_never_runs(scheduled, second_approver, clock, executions):
    response = _api(second_approver).post(
        reverse("approvals_api:approval_cancel", args=[scheduled.pk]),
        {"reason": "wrong customer, caught it in time"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "cancelled" and body["cancelled_by"] == "approver2"
    assert body["decided_by"] == "approver"  # who approved stays on the record

    clock.advance(WINDOW + 1)
    resume_call.run(scheduled.pk)  # the delayed task arrives: it records the refusal and runs nothing
    resume_call.run(scheduled.pk)
    scheduled.refresh_from_db()
    assert executions == []
    assert scheduled.status == ApprovalStatus.CANCELLED and scheduled.completed_at is not None
    call = scheduled.call
    call.refresh_from_db()
    error = call.result["error"]
    assert call.status == CallStatus.DECLINED and error["code"] == "approval_cancelled"
    assert error["message"].startswith("approver2 cancelled this approved call before it ran: wrong customer")
    event = scheduled.events.get(action="cancelled")
    assert event.actor == second_approver and event.from_status == "scheduled" and event.detail["via"] == "api"
    decided = RunEvent.objects.filter(run=call.run, kind="approval.decided").order_by("id").last().payload
    assert decided["decision"] == "cancelled" and decided["decided_by"] == "approver2"
    call.run.refresh_from_db()
    assert call.run.status == RunStatus.RUNNING  # nothing waits any more
    assert Span.objects.filter(trace__run_id=call.run_id, name="approval.cancelled").exists()


def test_too_late_once_it_ran(scheduled, second_approver, clock, executions):
    clock.advance(WINDOW + 1)
    resume_call.run(scheduled.pk)
    response = _api(second_approver).post(
        reverse("approvals_api:approval_cancel", args=[scheduled.pk]), {"reason": "oops"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_cancellable"
    assert "already started" in response.json()["error"]["message"]
    assert len(executions) == 1


def test_only_a_scheduled_request_can_be_cancelled(acme, agent, second_approver):
    pending = open_request(tenant=acme, agent=agent)
    response = _api(second_approver).post(
        reverse("approvals_api:approval_cancel", args=[pending.pk]), {"reason": "no"}, format="json"
    )
    assert response.status_code == 409 and "decline it instead" in response.json()["error"]["message"]
    assert ApprovalRequest.objects.get(pk=pending.pk).status == ApprovalStatus.PENDING


def test_who_may_not_cancel_changes_nothing(scheduled, viewer, outsider, second_approver, executions):
    url = reverse("approvals_api:approval_cancel", args=[scheduled.pk])
    response = _api(viewer).post(url, {"reason": "I am only a viewer"}, format="json")
    assert response.status_code == 403  # a member without the role
    response = _api(outsider).post(url, {"reason": "another tenant's approver"}, format="json")
    assert response.status_code == 404  # another tenant's request does not exist for them
    _, read_only = create_personal_token(user=second_approver, name="read", scopes=["read"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {read_only}")
    assert client.post(url, {"reason": "read-only token"}, format="json").status_code == 403
    assert _api(second_approver).get(url).status_code == 405  # wrong method
    response = _api(second_approver).post(url, {"reason": "   "}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_cancel"
    response = _api(second_approver).post(url, {}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_cancel"
    scheduled.refresh_from_db()
    assert scheduled.status == ApprovalStatus.SCHEDULED
    assert not scheduled.events.filter(action="cancelled").exists()


def test_the_console_page_shows_the_window_and_cancels(client, scheduled, second_approver, viewer, outsider):
    url = reverse("approvals:detail", args=[scheduled.pk])
    cancel = reverse("approvals:cancel", args=[scheduled.pk])
    page = login(client, second_approver).get(url).content.decode()
    assert "Runs at" in page and "Cancel the call" in page and cancel in page

    viewer_page = login(client, viewer).get(url).content.decode()
    assert "Runs at" in viewer_page and "Cancel the call" not in viewer_page
    assert client.post(cancel, {"reason": "viewer"}).status_code == 403
    assert login(client, outsider).post(cancel, {"reason": "outsider"}).status_code == 404
    login(client, second_approver)
    assert client.get(cancel).status_code == 405
    assert client.post(cancel, {"reason": ""}).status_code == 400

    response = client.post(cancel, {"reason": "the customer called back"})
    assert response.status_code == 302 and response.url == url
    scheduled.refresh_from_db()
    assert scheduled.status == ApprovalStatus.CANCELLED and scheduled.cancelled_by_label == "approver2"
    page = client.get(url).content.decode()
    assert "Taken back by" in page and "the customer called back" in page
    assert client.post(cancel, {"reason": "again"}).status_code == 409
    history = client.get(reverse("approvals:history")).content.decode()
    assert "cancelled" in history and "the customer called back" in history  # among approver2's decisions


def test_a_closed_run_takes_its_scheduled_calls_with_it(scheduled, executions, clock):
    assert services.cancel_approvals_for_run(run=scheduled.call.run, reason="The run was stopped.") == 1
    scheduled.refresh_from_db()
    assert scheduled.status == ApprovalStatus.CANCELLED and scheduled.cancelled_by_label == "system (run closed)"
    clock.advance(WINDOW + 1)
    resume_call.run(scheduled.pk)
    assert executions == []


def test_the_beat_sweep_catches_a_scheduled_call_whose_task_was_lost(scheduled, clock, executions, monkeypatch):
    enqueued = []
    monkeypatch.setattr(resume_call, "delay", enqueued.append)  # the broker's edge: what the sweep queues
    assert services.resume_orphaned_approvals() == 0  # not due yet
    clock.advance(WINDOW + services.SCHEDULE_SLACK.total_seconds() + 1)
    assert services.resume_orphaned_approvals() == 1 and enqueued == [scheduled.pk]


def test_a_long_window_is_waited_out_in_steps_below_the_visibility_timeout(acme, agent, approver, clock, settings):
    request = open_request(tenant=acme, agent=agent, skill_version=delayed_version(seconds=86400, name="iam.drop"))
    services.decide_approval(approval=request, user=approver, decision="approve")
    request.refresh_from_db()
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert services.resume_countdown(request) == visibility / 2
    clock.advance(86400 - 10)
    assert 0 < services.resume_countdown(request) <= 10
    assert request.scheduled_for - request.decided_at >= timedelta(seconds=86400 - 5)


def test_the_inbox_lists_calls_in_their_window_to_approvers_only(client, scheduled, second_approver, viewer, outsider):
    cancel = reverse("approvals:cancel", args=[scheduled.pk])
    page = login(client, second_approver).get(reverse("approvals:inbox")).content.decode()
    assert "In their undo window" in page and cancel in page
    for other in (viewer, outsider):
        page = login(client, other).get(reverse("approvals:inbox")).content.decode()
        assert "In their undo window" not in page and cancel not in page
