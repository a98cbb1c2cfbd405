"""Celery tasks of traces: alert evaluation, retention and forwarding (beat), each safe to run twice."""

import random

import httpx
from celery import shared_task

from traces import services
from traces.models import TraceSettings

FORWARD_MAX_RETRIES = 5


@shared_task(ignore_result=True)
def evaluate_alerts() -> int:
    return len(services.evaluate_alert_rules())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def email_alert(alert_id: int) -> None:
    services.email_alert(alert_id=alert_id)


@shared_task(ignore_result=True)
def purge_expired_traces() -> int:
    return services.purge_expired_traces()


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True, max_retries=FORWARD_MAX_RETRIES)
def forward_spans(self, tenant_id: int) -> int:
    """Forward one batch of a tenant's spans; transient HTTP failures retry with backoff and jitter."""
    try:
        return services.forward_spans(tenant_id=tenant_id)
    except httpx.HTTPError as exc:
        if self.request.retries >= FORWARD_MAX_RETRIES:
            return 0  # the cursor did not move: the next beat tick starts again from the same span
        raise self.retry(exc=exc, countdown=min(300, 2**self.request.retries) + random.random()) from exc


@shared_task(ignore_result=True)
def forward_all() -> int:
    tenant_ids = list(
        TraceSettings.objects.filter(forward_enabled=True)
        .exclude(forward_endpoint="")
        .values_list("tenant_id", flat=True)
    )
    for tenant_id in tenant_ids:
        forward_spans.delay(tenant_id)
    return len(tenant_ids)
