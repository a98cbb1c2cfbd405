"""Stop, suspend and freeze against the real thing: PostgreSQL, Redis as the broker and a real Celery worker
process, with the downstream counting its real effects in a ledger shared across processes
(tests/approvals/worker_tools.py). A stopped run's approved call still in the queue never executes; a
suspended agent's approved call waits in the worker and runs after the resume; a frozen tenant's writes
are denied, including one approved before the freeze, while its reads go on."""

import os

import pytest
import redis
from django.conf import settings
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from approvals.tasks import RESUME_QUEUE
from console.celery import app as celery_app
from runs.models import CallStatus, ToolCall
from tests.approvals import worker_tools
from tests.approvals.gate_world import REFUND_SCHEMA, build_refund_world, create_active_version, downstream_manifest
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

REFUND = {"customer_id": "c-1", "amount_cents": 500}
CEILING = 90  # seconds: generous, the tests wait on a condition, never on this


@pytest.fixture
def broker():
    """Celery through Redis (not eager), with empty queues; `start()` launches the worker when the test says."""
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    processes = []

    class Broker:
        @staticmethod
        def start(tmp_path) -> None:
            env = worker_env(AIRLOCK_TEST_LEDGER=str(worker_tools.ledger_path()), AIRLOCK_SUSPENDED_RECHECK_SECONDS="1")
            processes.append(
                start_worker(
                    f"incident{os.getpid()}",
                    tmp_path / "worker.log",
                    env,
                    "--pool=solo",
                    "-I",
                    "tests.approvals.worker_tools",
                )
            )

    try:
        yield Broker
    finally:
        celery_app.control.purge()
        celery_app.conf.task_always_eager = True
        for process in processes:
            stop_worker(process)


def _human(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _refund_awaiting(agent_client, run_id: str, call_id: str = "refund-1") -> ApprovalRequest:
    [result] = post_calls(
        agent_client, run_id, [{"call_id": call_id, "name": "billing.create_refund", "arguments": REFUND}]
    ).json()["results"]
    assert result["status"] == "approval_required", result
    return ApprovalRequest.objects.get(pk=result["approval_id"])


def _completed(approval: ApprovalRequest) -> ApprovalRequest | None:
    approval = ApprovalRequest.objects.get(pk=approval.pk)
    return approval if approval.completed_at is not None else None


def test_a_stopped_runs_approved_but_queued_call_never_executes(
    broker, tmp_path, agent_client, acme, approver, second_approver
):
    build_refund_world(acme)
    run = start_run(agent_client)
    approval = _refund_awaiting(agent_client, run["run_id"])
    decide_approval(approval=approval, user=approver, decision="approve")  # the resume is queued in Redis
    assert redis.Redis.from_url(settings.REDIS_URL).llen(RESUME_QUEUE) == 1

    stopped = _human(second_approver).post(
        reverse("runs_api:run_stop", args=[run["run_id"]]), {"reason": "refund storm"}, format="json"
    )
    assert stopped.status_code == 200
    broker.start(tmp_path)  # the worker takes the queued resume only now
    wait_for(lambda: _completed(approval), CEILING, "the queued resume to settle")

    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED
    assert approval.outcome["error"]["code"] == "run_stopped"
    assert "approver2 stopped this run: refund storm" in approval.outcome["error"]["message"]
    assert ToolCall.objects.get(pk=approval.call_id).status == CallStatus.DENIED
    assert worker_tools.executions() == []  # the downstream counter: 0


def test_a_suspended_agents_approved_call_waits_and_runs_after_resume(
    broker, tmp_path, agent_client, acme, agent, approver, tenant_admin
):
    build_refund_world(acme)
    broker.start(tmp_path)
    run = start_run(agent_client)
    approval = _refund_awaiting(agent_client, run["run_id"])
    admin = _human(tenant_admin)
    assert (
        admin.post(reverse("agent-suspend", args=[agent.pk]), {"reason": "looping"}, format="json").status_code == 200
    )

    decide_approval(approval=approval, user=approver, decision="approve")
    # Held, not refused: the worker claimed the resume, saw the suspension and looks again (every second here).
    wait_for(
        lambda: ApprovalRequest.objects.filter(pk=approval.pk, resume_attempts__gte=3).exists(),
        CEILING,
        "the resume to look at the suspension three times",
    )
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTING and approval.completed_at is None
    assert ToolCall.objects.get(pk=approval.call_id).status == CallStatus.AWAITING_APPROVAL
    assert worker_tools.executions() == []

    assert admin.post(reverse("agent-resume", args=[agent.pk])).status_code == 200
    wait_for(lambda: _completed(approval), CEILING, "the held call to run after the resume")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED
    assert len(worker_tools.executions()) == 1
    assert ToolCall.objects.get(pk=approval.call_id).status == CallStatus.SUCCEEDED


def test_a_frozen_tenants_writes_are_denied_while_its_reads_pass(
    broker, tmp_path, agent_client, acme, approver, tenant_admin
):
    build_refund_world(acme)
    create_active_version(
        downstream_manifest("billing.lookup_refund", effect="read", approval="not_required", schema=REFUND_SCHEMA)
    )
    broker.start(tmp_path)
    run = start_run(agent_client)
    approved_before = _refund_awaiting(agent_client, run["run_id"], "refund-before")
    frozen = _human(tenant_admin).post(reverse("tenant-freeze", args=["acme"]), {"reason": "incident"}, format="json")
    assert frozen.status_code == 200

    read, write = post_calls(
        agent_client,
        run["run_id"],
        [
            {"call_id": "look", "name": "billing.lookup_refund", "arguments": REFUND},
            {"call_id": "refund-2", "name": "billing.create_refund", "arguments": REFUND},
        ],
    ).json()["results"]
    assert read["status"] == "ok"
    assert write["status"] == "error" and write["error"]["code"] == "tenant_frozen"
    assert len(worker_tools.executions()) == 1  # the read, and only the read

    decide_approval(approval=approved_before, user=approver, decision="approve")  # approved during the freeze
    wait_for(lambda: _completed(approved_before), CEILING, "the worker's live check")
    approved_before.refresh_from_db()
    assert approved_before.status == ApprovalStatus.FAILED
    assert approved_before.outcome["error"]["code"] == "tenant_frozen"
    assert len(worker_tools.executions()) == 1
