"""Exactly-once across a real worker restart: a Celery worker (subprocess, Redis broker, PostgreSQL)
is killed with SIGKILL after the downstream effect but before Airlock records it; the unacknowledged
task comes back (acks_late, visibility timeout) to a fresh worker, which must not execute again and
must record the outcome the agent then reads by long poll."""

import os
import signal
import time

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from console.celery import app as celery_app
from runs.models import RunEvent
from tests.approvals import worker_tools
from tests.approvals.gate_world import build_refund_world
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 30  # the shortest the settings allow; the call's lease (its timeout + 30 s) runs out by then too


def _worker(name: str, log, env: dict):
    return start_worker(name, log, env, "--pool=solo", "-I", "tests.approvals.worker_tools", ready=False)


@pytest.fixture
def restart_env(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    env = worker_env(
        CELERY_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT),
        AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS="20",
        AIRLOCK_JOB_CHECK_CAP_SECONDS="20",  # below the timeout
        AIRLOCK_TEST_LEDGER=str(ledger),
    )
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()  # no stale tasks from earlier runs
    yield env
    celery_app.conf.task_always_eager = True


def test_killed_worker_task_reruns_and_executes_once(agent_client, acme, approver, restart_env, tmp_path):
    build_refund_world(acme)
    first = _worker("first", tmp_path / "first.log", {**restart_env, "AIRLOCK_TEST_SLOW_AFTER": "60"})
    second = None
    try:
        wait_for(lambda: "ready" in (tmp_path / "first.log").read_text(), 30, "the first worker")
        run = start_run(agent_client)
        result = post_calls(
            agent_client,
            run["run_id"],
            [
                {
                    "call_id": "a",
                    "name": "billing.create_refund",
                    "arguments": {"customer_id": "c-1", "amount_cents": 99},
                }
            ],
        ).json()["results"][0]
        approval = ApprovalRequest.objects.get(pk=result["approval_id"])
        decide_approval(approval=approval, user=approver, decision="approve")  # enqueued on commit
        delivered_at = time.time()

        marker = tmp_path / "ledger.executed"
        wait_for(marker.exists, 30, "the downstream effect in the first worker")
        os.killpg(first.pid, signal.SIGKILL)  # mid-task: executed downstream, outcome not yet recorded
        first.wait(10)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.EXECUTING and approval.completed_at is None

        # A worker restores unacknowledged messages older than the visibility timeout when it starts
        # (and then only every ~100 s by kombu's default sweep), so restart it after the timeout.
        wait_for(
            lambda: time.time() > delivered_at + VISIBILITY_TIMEOUT + 1,
            VISIBILITY_TIMEOUT + 5,
            "the visibility timeout",
        )
        second = _worker("second", tmp_path / "second.log", restart_env)
        wait_for(
            lambda: ApprovalRequest.objects.get(pk=approval.pk).completed_at is not None,
            30,
            "the re-delivered task to finish",
        )
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.EXECUTED and approval.outcome["status"] == "ok"
        assert len(worker_tools.executions()) == 1  # the downstream effect happened once
        assert RunEvent.objects.filter(run_id=run["run_id"], kind="call.completed").count() == 1
        feed = agent_client.get(reverse("runs_api:run_events", args=[run["run_id"]]), {"wait": 1}).json()
        [completed] = [e for e in feed["events"] if e["kind"] == "call.completed"]
        assert completed["payload"]["result"]["content"]["amount_cents"] == 99
        assert approval.resume_attempts >= 2
    finally:
        for process in (first, second):
            if process is not None:
                stop_worker(process)
