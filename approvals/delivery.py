"""One webhook delivery attempt: SSRF check, HMAC signature, exponential backoff with jitter."""

import logging
import os
import random
import time
from datetime import timedelta

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from approvals import tasks, webhooks
from approvals.models import DeliveryStatus, WebhookDelivery
from lib import egress

logger = logging.getLogger(__name__)


_client: httpx.Client | None = None
_client_pid = 0


def _http() -> httpx.Client:
    """One client per process, behind the egress guard (which checks and pins every connection, and
    follows no redirect); re-made after a fork."""
    global _client, _client_pid
    if _client is None or _client_pid != os.getpid():
        _client = egress.client(timeout=settings.AIRLOCK_WEBHOOK_TIMEOUT_SECONDS)
        _client_pid = os.getpid()
    return _client


def backoff_seconds(attempt: int, *, jitter: bool = True) -> float:
    """Delay before retry number `attempt` (1-based): base * 2^(attempt-1), capped, with up to 50% jitter.

    The cap stays below the Redis visibility timeout, so a retry scheduled with a countdown is never
    re-delivered early by the broker.
    """
    base = settings.AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS
    cap = settings.AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS
    delay = min(cap, base * (2 ** (attempt - 1)))
    return delay * (0.5 + random.random() / 2) if jitter else delay


def attempt_delivery(*, delivery_id: str) -> WebhookDelivery | None:
    delivery = WebhookDelivery.objects.select_related("run").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != DeliveryStatus.PENDING:
        return delivery
    check = webhooks.check_notification_url if delivery.approval_id else webhooks.check_callback_url
    try:
        check(delivery.url)
    except webhooks.UnsafeCallbackURL as exc:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.BLOCKED, last_error=str(exc))
        logger.warning("webhook %s blocked: %s", delivery.pk, exc)
        return delivery
    # Claim this attempt, so two copies of the task do not post the same attempt twice.
    if not WebhookDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PENDING, attempts=delivery.attempts
    ).update(attempts=F("attempts") + 1):
        return delivery
    attempt = delivery.attempts + 1
    body = delivery.body.encode()
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Airlock-Webhooks/1",
        "X-Airlock-Delivery": str(delivery.pk),
        "X-Airlock-Timestamp": str(timestamp),
        "X-Airlock-Signature": webhooks.sign(secret=delivery.signing_secret, timestamp=timestamp, body=body),
    }
    status_code, error = None, ""
    try:
        response = _http().post(delivery.url, content=body, headers=headers)
        status_code = response.status_code
        if 200 <= status_code < 300:
            WebhookDelivery.objects.filter(pk=delivery.pk).update(
                status=DeliveryStatus.DELIVERED,
                delivered_at=timezone.now(),
                last_status_code=status_code,
                last_error="",
                next_attempt_at=None,
            )
            return delivery
        error = f"HTTP {status_code}"
    except egress.EgressRefused as exc:  # the name now resolves somewhere it may not go (DNS rebinding)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.BLOCKED, last_error=str(exc), next_attempt_at=None
        )
        logger.warning("webhook %s blocked: %s", delivery.pk, exc)
        return delivery
    except httpx.HTTPError as exc:
        error = egress.describe_failure(exc, who="the receiver")  # never the receiver's own words
    max_attempts = settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS
    if attempt >= max_attempts:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.FAILED, last_error=error, last_status_code=status_code, next_attempt_at=None
        )
        return delivery
    delay = backoff_seconds(attempt)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        last_error=error, last_status_code=status_code, next_attempt_at=timezone.now() + timedelta(seconds=delay)
    )
    tasks.deliver_webhook.apply_async((str(delivery.pk),), countdown=delay)
    return delivery
