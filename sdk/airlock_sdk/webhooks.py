"""Verifying Airlock's signed webhooks: signature, timestamp window and duplicate deliveries.

Headers: `X-Airlock-Delivery` (the same id on every retry), `X-Airlock-Timestamp` (unix
seconds) and `X-Airlock-Signature: v1=<hex HMAC-SHA256(secret, f"{timestamp}.{raw body}")>`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from airlock_sdk.errors import WebhookVerificationError

DEFAULT_TOLERANCE = 300


def sign_webhook(secret: str, timestamp: int | str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


class DeliveryLog:
    """Remembers delivery ids for `ttl` seconds (bounded), so a retried delivery is seen once."""

    def __init__(self, *, ttl: float = 2 * DEFAULT_TOLERANCE, max_entries: int = 100_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, delivery_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            while self._seen and (
                next(iter(self._seen.values())) < now - self.ttl or len(self._seen) >= self.max_entries
            ):
                self._seen.popitem(last=False)
            if delivery_id in self._seen:
                return False
            self._seen[delivery_id] = now
            return True


class WebhookVerifier:
    """Verify deliveries for one run's `webhook_secret` (keep one verifier per secret).

    `verify(headers, body)` returns the event dict, or raises WebhookVerificationError with
    `reason` one of: missing_header, bad_signature, stale_timestamp, duplicate, bad_body.
    Answer 2xx to duplicates anyway: Airlock retries until it sees one.
    """

    def __init__(
        self, secret: str, *, tolerance: int = DEFAULT_TOLERANCE, deliveries: DeliveryLog | None = None, clock=time.time
    ) -> None:
        self.secret = secret
        self.tolerance = tolerance
        self.deliveries = deliveries or DeliveryLog(ttl=2 * tolerance)
        self.clock = clock

    def verify(self, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        lowered = {k.lower(): v for k, v in headers.items()}
        delivery = lowered.get("x-airlock-delivery")
        timestamp = lowered.get("x-airlock-timestamp")
        signature = lowered.get("x-airlock-signature")
        if not (delivery and timestamp and signature):
            raise WebhookVerificationError(
                "missing_header", "The X-Airlock-Delivery, -Timestamp and -Signature headers are all required."
            )
        expected = sign_webhook(self.secret, timestamp, body)
        offered = [part.strip() for part in signature.split(",")]
        if not any(hmac.compare_digest(expected, candidate) for candidate in offered):
            raise WebhookVerificationError("bad_signature", "The signature does not match this run's secret.")
        try:
            age = abs(self.clock() - int(timestamp))
        except ValueError:
            raise WebhookVerificationError("stale_timestamp", "The timestamp is not a number.") from None
        if age > self.tolerance:
            raise WebhookVerificationError(
                "stale_timestamp",
                f"The timestamp is {age:.0f} s away from now "
                f"(tolerance {self.tolerance} s): refused as a possible replay.",
            )
        try:
            event = json.loads(body)
        except ValueError:
            raise WebhookVerificationError("bad_body", "The body is not JSON.") from None
        if not self.deliveries.first_time(delivery):
            raise WebhookVerificationError("duplicate", f"Delivery {delivery} was already received.")
        return event


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    deliveries: DeliveryLog | None = None,
) -> dict[str, Any]:
    """One-shot form of `WebhookVerifier.verify`; pass a shared `deliveries` log to catch duplicates."""
    return WebhookVerifier(secret, tolerance=tolerance, deliveries=deliveries).verify(headers, body)
