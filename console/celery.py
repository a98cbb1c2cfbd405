import os

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("airlock")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def release_database_connections(sender=None, **kwargs) -> None:
    """Around each task, what Django does around a request: give the connection back to the pool (or
    close it, without a pool) and drop a broken one, keeping the pool itself open (CELERY_DB_REUSE_MAX).
    An eager task runs inside its caller's transaction, so its connection is left alone."""
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    close_old_connections()
