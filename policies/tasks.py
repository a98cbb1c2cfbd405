"""Periodic work of the policies app (Celery beat, or run_periodic in the embedded mode)."""

from celery import shared_task

from policies import services


@shared_task(ignore_result=True)
def publish_expired_grants() -> bool:
    return services.publish_snapshot_if_grants_expired() is not None
