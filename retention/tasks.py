"""Retention on a schedule (Celery beat, or run_periodic in the embedded mode); safe to run twice."""

from celery import shared_task

from retention.services import purge_expired_records as purge


@shared_task(ignore_result=True)
def purge_expired_records() -> dict:
    return purge().as_dict()
