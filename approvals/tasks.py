"""Celery tasks of approvals: resume a decided call, deliver webhooks, notify approvers, expire and
escalate (beat).

Tasks take ids, claim their row with a conditional update and then act, so late acknowledgement
and reject-on-worker-lost (a re-delivered task after a crash) are safe.
"""

import random

from celery import shared_task

from approvals import delivery, notifications, services, slack
from runs.services import AgentSuspended, CallHeldElsewhere

RESUME_MAX_RETRIES = 5
SUSPENDED_MAX_RETRIES = 10**6  # looked at again every AIRLOCK_SUSPENDED_RECHECK_SECONDS for as long as it lasts
# Queues of their own (CELERY_TASK_QUEUES) for what an agent is waiting for, so that neither waits behind a
# burst of notifications, nor a resume behind a slow webhook receiver.
RESUME_QUEUE = "resume"
WEBHOOK_QUEUE = "webhooks"


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=RESUME_MAX_RETRIES,
    queue=RESUME_QUEUE,
)
def resume_call(self, approval_id: int) -> None:
    """Resume the paused call of a decided request; running it twice acts once."""
    try:
        approval = services.resume_approval(approval_id=approval_id)
    except CallHeldElsewhere as exc:  # another delivery is executing it; look again once its lease may end
        raise self.retry(countdown=exc.retry_after, max_retries=RESUME_MAX_RETRIES * 10) from exc
    except AgentSuspended as exc:  # held, not refused: it runs once the suspension ends
        raise self.retry(countdown=exc.retry_after, max_retries=SUSPENDED_MAX_RETRIES) from exc
    except Exception as exc:
        final = self.request.retries >= RESUME_MAX_RETRIES
        services.record_resume_failure(approval_id=approval_id, error=f"{type(exc).__name__}: {exc}", final=final)
        if final:
            raise
        raise self.retry(exc=exc, countdown=min(300, 2**self.request.retries) + random.random()) from exc
    countdown = services.resume_countdown(approval)
    if countdown and not self.request.is_eager:  # a long undo window, waited out in steps
        resume_call.apply_async((approval_id,), countdown=countdown)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True, queue=WEBHOOK_QUEUE)
def deliver_webhook(delivery_id: str) -> None:
    delivery.attempt_delivery(delivery_id=delivery_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def notify_new_request(approval_id: int) -> None:
    notifications.notify_new_request(approval_id=approval_id)


@shared_task(ignore_result=True, queue=WEBHOOK_QUEUE)
def answer_slack(response_url: str, body: dict) -> None:
    """Update a Slack message (or tell its clicker something) after a button press."""
    slack.send_answer(response_url=response_url, body=body)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def send_notice_mail(notice_id: int) -> None:
    notifications.send_notice_mail(notice_id=notice_id)


@shared_task(ignore_result=True)
def send_digests() -> int:
    return notifications.send_due_digests()


@shared_task(ignore_result=True)
def expire_approvals() -> int:
    return services.expire_due_approvals()


@shared_task(ignore_result=True)
def escalate_approvals() -> int:
    return services.escalate_overdue_approvals()


@shared_task(ignore_result=True)
def resume_orphans() -> int:
    return services.resume_orphaned_approvals()
