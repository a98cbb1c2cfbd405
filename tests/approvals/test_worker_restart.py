"""Exactly-once across a real worker restart: a Celery worker (subprocess, Redis broker, PostgreSQL)
is killed with SIGKILL after the downstream effect but before Airlock records it; the unacknowledged
task comes back (acks_late, visibility timeout) to a fresh worker, which must not execute again and
must record the outcome the agent then reads by long poll."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from console.celery import app as celery_app
from runs.models import RunEvent
from tests.approvals import worker_tools
from tests.approvals.gate_world import build_refund_world
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 30  # the shortest the settings allow; the call's lease (its timeout + 30 s) runs out by then too


def _worker(name: str, log: Path, env: dict) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "console",
        "worker",
        "--pool=solo",
        "-n",
        f"{name}@%h",
        "-I",
        "tests.approvals.worker_tools",
        "--loglevel=INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    return subprocess.Popen(
        command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, cwd=settings.BASE_DIR
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def worker_env(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS": "20",
        "AIRLOCK_JOB_CHECK_CAP_SECONDS": "20",  # below the timeout
        "AIRLOCK_TEST_LEDGER": str(ledger),
    }
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()  # no stale tasks from earlier runs
    yield env
    celery_app.conf.task_always_eager = True


def test_killed_worker_task_reruns_and_executes_once(agent_client, acme, approver, worker_env, tmp_path):
    build_refund_world(acme)
    first = _worker("first", tmp_path / "first.log", {**worker_env, "AIRLOCK_TEST_SLOW_AFTER": "60"})
    second = None
    try:
        _wait_for(lambda: "ready" in (tmp_path / "first.log").read_text(), 30, "the first worker")
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
        _wait_for(marker.exists, 30, "the downstream effect in the first worker")
        os.killpg(first.pid, signal.SIGKILL)  # mid-task: executed downstream, outcome not yet recorded
        first.wait(10)
        approval.refresh_from_db()
        assert approval.status == ApprovalStatus.EXECUTING and approval.completed_at is None

        # A worker restores unacknowledged messages older than the visibility timeout when it starts
        # (and then only every ~100 s by kombu's default sweep), so restart it after the timeout.
        _wait_for(
            lambda: time.time() > delivered_at + VISIBILITY_TIMEOUT + 1,
            VISIBILITY_TIMEOUT + 5,
            "the visibility timeout",
        )
        second = _worker("second", tmp_path / "second.log", worker_env)
        _wait_for(
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
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
