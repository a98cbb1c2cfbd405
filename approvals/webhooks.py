"""Signed webhook deliveries of run events to a run's callback URL, with SSRF checks."""

import hashlib
import hmac
import json
import time

from approvals import tasks
from approvals.models import DeliveryStatus, WebhookDelivery
from lib.egress import EgressRefused, check_url, current_policy
from runs.events import event_to_dict


class UnsafeCallbackURL(ValueError):
    pass


def sign(*, secret: str, timestamp: int, body: bytes) -> str:
    """`v1=<hex HMAC-SHA256(secret, "{timestamp}.{body}")>`, as the API contract states."""
    message = f"{timestamp}.".encode() + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(*, secret: str, timestamp: str, body: bytes, signature: str, tolerance: int = 300) -> bool:
    """What a receiver does: recompute, compare in constant time, and refuse stale timestamps."""
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    if abs(time.time() - ts) > tolerance:
        return False
    return hmac.compare_digest(sign(secret=secret, timestamp=ts, body=body), signature)


def check_callback_url(url: str) -> None:
    """Refuse URLs that would make Airlock call its own network (SSRF): the egress guard's rules
    (lib/egress.py). The delivery's connection is checked again, and pinned, when it is made."""
    try:
        check_url(url)
    except EgressRefused as exc:
        raise UnsafeCallbackURL(str(exc)) from exc


def check_notification_url(url: str) -> None:
    """A tenant's notification webhook: https (Slack's incoming webhooks are), then the egress guard's
    rules. Plain http only where the guard lets private addresses out (DEBUG, a local receiver)."""
    if not url.lower().startswith("https://") and not current_policy().allow_private:
        raise UnsafeCallbackURL("the webhook URL must start with https://")
    check_callback_url(url)


def schedule_deliveries(event) -> None:
    """Run event listener: one delivery row per event for runs with a callback URL, sent after commit."""
    run = event.run
    if not run.callback_url:
        return

    body = json.dumps(event_to_dict(event), separators=(",", ":"), sort_keys=True)
    delivery = WebhookDelivery.objects.create(
        run=run, event=event, url=run.callback_url, body=body, status=DeliveryStatus.PENDING
    )
    tasks.deliver_webhook.delay_on_commit(str(delivery.id))
