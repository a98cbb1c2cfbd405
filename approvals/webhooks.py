"""Signed webhook deliveries of run events to a run's callback URL, with SSRF checks."""

import hashlib
import hmac
import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit

from django.conf import settings

from approvals.models import DeliveryStatus, WebhookDelivery


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


def _address_allowed(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not (ip.is_loopback or ip.is_link_local or ip.is_private or ip.is_reserved or ip.is_multicast
                or ip.is_unspecified or not ip.is_global)


def check_callback_url(url: str) -> None:
    """Refuse URLs that would make Airlock call its own network (SSRF), unless operators allow it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeCallbackURL("The callback URL must be an http(s) URL with a host.")
    if settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                                   proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise UnsafeCallbackURL(f"The callback host {parts.hostname!r} does not resolve.") from exc
    for info in infos:
        if not _address_allowed(info[4][0]):
            raise UnsafeCallbackURL(
                f"The callback host {parts.hostname!r} resolves to {info[4][0]}, a loopback, link-local or "
                "private address; set AIRLOCK_ALLOW_PRIVATE_CALLBACKS=1 to allow it."
            )


def schedule_deliveries(event) -> None:
    """Run event listener: one delivery row per event for runs with a callback URL, sent after commit."""
    run = event.run
    if not run.callback_url:
        return
    from runs.events import event_to_dict

    body = json.dumps(event_to_dict(event), separators=(",", ":"), sort_keys=True)
    delivery = WebhookDelivery.objects.create(run=run, event=event, url=run.callback_url, body=body,
                                              status=DeliveryStatus.PENDING)
    from approvals.tasks import deliver_webhook

    deliver_webhook.delay_on_commit(str(delivery.id))
