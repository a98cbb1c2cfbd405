"""The undo window live: PostgreSQL, Redis and a real Celery worker (prefork, as a deployment starts it).
An agent calls a skill with `risk.delay_seconds: 2` through the gate; once approved, the call waits, runs
once after the window (the downstream's ledger has one entry), and a second one cancelled inside its window
never runs (no entry), while the agent sees both pending and then the outcome."""

import os

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import cancel_scheduled_approval, decide_approval
from console.celery import app as celery_app
from registry.snapshots import publish_snapshot
from tests.approvals import worker_tools
from tests.approvals.gate_world import REFUND_SCHEMA, create_active_version, downstream_manifest
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.conftest import post_calls, start_run
from tests.runs.factories import grant

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

WINDOW = 2
CEILING = 60  # generous: the worker is a separate process on a busy machine


@pytest.fixture
def worker(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    process = start_worker(
        f"undo{os.getpid()}",
        tmp_path / "worker.log",
        worker_env(AIRLOCK_TEST_LEDGER=str(ledger)),
        "--pool=prefork",
        "--concurrency=1",
        "-I",
        "tests.approvals.worker_tools",
    )
    try:
        yield
    finally:
        celery_app.control.purge()
        celery_app.conf.task_always_eager = True
        stop_worker(process)


def _call_needing_approval(agent_client, run_id: str, call_id: str, customer: str) -> ApprovalRequest:
    arguments = {"customer_id": customer, "amount_cents": 900}
    result = post_calls(
        agent_client, run_id, [{"call_id": call_id, "name": "billing.send_payout", "arguments": arguments}]
    ).json()["results"][0]
    assert result["status"] == "approval_required", result
    return ApprovalRequest.objects.get(pk=result["approval_id"])


def _what_the_agent_sees(agent_client, run_id: str) -> dict[str, str]:
    calls = agent_client.get(reverse("runs_api:run_detail", args=[run_id])).json()["calls"]
    return {call["call_id"]: call["status"] for call in calls}


def test_approved_runs_once_after_its_window_and_cancelled_never(worker, agent_client, acme, approver, second_approver):
    body = downstream_manifest("billing.send_payout", schema=REFUND_SCHEMA, team_slug="billing-platform")
    body["risk"]["delay_seconds"] = WINDOW
    create_active_version(body, publish=False)
    grant(acme, "billing.*")
    publish_snapshot(reason="undo window live test")
    run = start_run(agent_client)["run_id"]
    kept = _call_needing_approval(agent_client, run, "kept", "c-kept")
    taken_back = _call_needing_approval(agent_client, run, "taken-back", "c-back")

    decide_approval(approval=kept, user=approver, decision="approve")
    decide_approval(approval=taken_back, user=approver, decision="approve")
    kept.refresh_from_db()
    assert kept.status == ApprovalStatus.SCHEDULED
    cancel_scheduled_approval(approval=taken_back, user=second_approver, reason="wrong customer")
    assert worker_tools.executions() == []  # nothing ran at approval time
    assert _what_the_agent_sees(agent_client, run) == {"kept": "awaiting_approval", "taken-back": "awaiting_approval"}

    wait_for(lambda: ApprovalRequest.objects.get(pk=kept.pk).completed_at is not None, CEILING, "the kept call")
    wait_for(lambda: ApprovalRequest.objects.get(pk=taken_back.pk).completed_at is not None, CEILING, "the refusal")
    kept.refresh_from_db()
    taken_back.refresh_from_db()
    assert kept.status == ApprovalStatus.EXECUTED
    assert (kept.completed_at - kept.decided_at).total_seconds() >= WINDOW  # not before its window was over
    assert taken_back.status == ApprovalStatus.CANCELLED
    ledger = worker_tools.executions()
    assert [entry["result"]["customer_id"] for entry in ledger] == ["c-kept"]  # downstream: one, and only it
    assert taken_back.outcome["error"]["code"] == "approval_cancelled"
    assert _what_the_agent_sees(agent_client, run) == {"kept": "succeeded", "taken-back": "declined"}
