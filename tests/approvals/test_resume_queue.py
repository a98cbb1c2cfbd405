"""Resuming an approved call does not wait behind a burst of notifications: a real worker (prefork, one
process, Redis broker, PostgreSQL), started as a deployment starts it (no -Q), has a backlog of e-mail
tasks when a person approves; the approved call runs while most of that backlog is still queued."""

import os

import pytest
import redis
from django.conf import settings

from approvals.models import ApprovalRequest
from approvals.services import decide_approval
from approvals.tasks import RESUME_QUEUE, WEBHOOK_QUEUE, deliver_webhook, resume_call, send_notice_mail
from console.celery import app as celery_app
from tests.approvals.gate_world import build_refund_world
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

BACKLOG = 1500  # notification tasks queued before the decision (each a no-op on a notice that is gone)


@pytest.fixture
def worker(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    process = start_worker(
        f"resume{os.getpid()}",
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


def test_what_agents_wait_for_has_queues_of_its_own_that_a_plain_worker_consumes():
    assert resume_call.queue == RESUME_QUEUE and deliver_webhook.queue == WEBHOOK_QUEUE
    assert {RESUME_QUEUE, WEBHOOK_QUEUE} <= {queue.name for queue in settings.CELERY_TASK_QUEUES}
    assert {RESUME_QUEUE, WEBHOOK_QUEUE} <= set(celery_app.amqp.queues)  # what a worker without -Q consumes
    assert getattr(send_notice_mail, "queue", None) is None  # the default queue


def test_an_approved_call_runs_before_a_backlog_of_notifications_drains(worker, agent_client, acme, approver):
    build_refund_world(acme)
    run = start_run(agent_client)
    result = post_calls(
        agent_client,
        run["run_id"],
        [{"call_id": "a", "name": "billing.create_refund", "arguments": {"customer_id": "c-1", "amount_cents": 5}}],
    ).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    for notice_id in range(10**9, 10**9 + BACKLOG):
        send_notice_mail.delay(notice_id)
    queued = redis.Redis.from_url(settings.REDIS_URL)
    assert queued.llen("celery") > BACKLOG / 2  # the worker is still busy with the backlog

    decide_approval(approval=approval, user=approver, decision="approve")  # enqueued on commit
    wait_for(lambda: ApprovalRequest.objects.get(pk=approval.pk).completed_at is not None, 60, "the resume")
    left = queued.llen("celery")
    assert left > BACKLOG / 4, f"the approved call waited for the backlog: {left} of {BACKLOG} notifications left"
    approval.refresh_from_db()
    assert approval.status == "executed"
