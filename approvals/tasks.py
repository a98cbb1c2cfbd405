"""Celery tasks of approvals: resume a decided call, deliver webhooks, expire and escalate (beat)."""

from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def resume_call(approval_id: int) -> None:
    """Resume the paused call of a decided request; claims first, so running twice acts once."""
    from approvals.services import resume_approval

    resume_approval(approval_id=approval_id)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver_webhook(delivery_id: str) -> None:
    from approvals.delivery import attempt_delivery

    attempt_delivery(delivery_id=delivery_id)
