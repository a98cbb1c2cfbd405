"""Agents close their runs: completed, failed or cancelled; pending approvals are cancelled with them."""

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from runs.models import Run, RunStatus
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.test_calls_api import catalog  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def finish(client, run_id, **body):
    return client.post(reverse("runs_api:run_finish", args=[run_id]), body, format="json")


def test_finishing_closes_the_run_and_tells_the_agent(agent_client, catalog):  # noqa: F811
    run = start_run(agent_client)
    response = finish(agent_client, run["run_id"], status="completed", reason="answered the customer")
    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    stored = Run.objects.get(pk=run["run_id"])
    assert (stored.status, stored.status_reason) == (RunStatus.COMPLETED, "answered the customer")
    assert stored.finished_at is not None
    events = agent_client.get(reverse("runs_api:run_events", args=[run["run_id"]])).json()["events"]
    assert events[-1]["kind"] == "run.status" and events[-1]["payload"]["status"] == "completed"


def test_finishing_twice_is_idempotent_but_a_different_status_conflicts(agent_client, catalog):  # noqa: F811
    run = start_run(agent_client)
    assert finish(agent_client, run["run_id"], status="failed").status_code == 200
    assert finish(agent_client, run["run_id"], status="failed").status_code == 200
    conflict = finish(agent_client, run["run_id"], status="completed")
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "run_closed"
    late = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo", {"order_id": "ord_1"})])
    assert late.status_code == 409


def test_unknown_status_is_refused(agent_client, catalog):  # noqa: F811
    run = start_run(agent_client)
    response = finish(agent_client, run["run_id"], status="paused")
    assert response.status_code == 400
    assert Run.objects.get(pk=run["run_id"]).status == RunStatus.RUNNING


def test_closing_a_paused_run_cancels_its_pending_approvals(agent_client, catalog):  # noqa: F811
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "admin.wipe_echo")]).json()["results"][0]
    assert result["status"] == "approval_required"
    assert finish(agent_client, run["run_id"], status="cancelled", reason="user gave up").status_code == 200
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    assert approval.status == ApprovalStatus.CANCELLED
    assert Run.objects.get(pk=run["run_id"]).status == RunStatus.CANCELLED


def test_another_tenants_agent_cannot_finish_the_run(agent_client, outsider_agent_client, catalog):  # noqa: F811
    run = start_run(agent_client)
    assert finish(outsider_agent_client, run["run_id"], status="cancelled").status_code == 404
    assert Run.objects.get(pk=run["run_id"]).status == RunStatus.RUNNING
