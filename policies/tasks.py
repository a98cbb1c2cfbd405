"""Periodic work of the policies app (Celery beat, or run_periodic in the embedded mode)."""

from celery import shared_task

from console.celery import app


@shared_task(ignore_result=True)
def publish_expired_grants() -> bool:
    from policies.services import publish_snapshot_if_grants_expired

    return publish_snapshot_if_grants_expired() is not None


@app.on_after_finalize.connect
def add_periodic_tasks(sender, **kwargs) -> None:
    sender.add_periodic_task(30.0, publish_expired_grants.s(), name="policies: snapshot after grants expire")
