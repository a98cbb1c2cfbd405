"""Retention on a schedule (Celery beat, or run_periodic in the embedded mode); safe to run twice."""

from celery import shared_task

from console.celery import app
from retention.services import purge_expired_records as purge


@shared_task(ignore_result=True)
def purge_expired_records() -> dict:
    return purge().as_dict()


@app.on_after_finalize.connect
def add_periodic_tasks(sender, **kwargs) -> None:
    sender.add_periodic_task(600.0, purge_expired_records.s(),
                             name="retention: delete closed runs past retention, then expired audit rows")
