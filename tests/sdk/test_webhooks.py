import json
import time

import pytest
from airlock_sdk import DeliveryLog, WebhookVerificationError, WebhookVerifier, sign_webhook

SECRET = "whsec-test"


def delivery(body: dict, *, secret: str = SECRET, timestamp: int | None = None, delivery_id: str = "d-1"):
    raw = json.dumps(body).encode()
    timestamp = int(time.time()) if timestamp is None else timestamp
    headers = {
        "X-Airlock-Delivery": delivery_id,
        "X-Airlock-Timestamp": str(timestamp),
        "X-Airlock-Signature": sign_webhook(secret, timestamp, raw),
    }
    return headers, raw


def test_a_genuine_delivery_returns_the_event():
    event = {"id": 7, "kind": "approval.decided", "payload": {"approval_id": 3, "decision": "approved"}}
    headers, raw = delivery(event)
    assert WebhookVerifier(SECRET).verify(headers, raw) == event


def test_signature_matches_the_contract_formula():
    import hashlib
    import hmac

    assert (
        sign_webhook("k", 1700000000, b'{"a":1}')
        == "v1=" + hmac.new(b"k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    )


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (lambda h, b: (h, b.replace(b"approved", b"declined")), "bad_signature"),
        (lambda h, b: ({**h, "X-Airlock-Signature": "v1=" + "0" * 64}, b), "bad_signature"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-Airlock-Timestamp"}, b), "missing_header"),
    ],
)
def test_tampered_deliveries_are_refused(tamper, reason):
    headers, raw = delivery({"kind": "approval.decided", "payload": {"decision": "approved"}})
    headers, raw = tamper(headers, raw)
    with pytest.raises(WebhookVerificationError) as caught:
        WebhookVerifier(SECRET).verify(headers, raw)
    assert caught.value.reason == reason


def test_a_delivery_signed_with_another_secret_is_refused():
    headers, raw = delivery({"kind": "run.status"}, secret="someone-else")
    with pytest.raises(WebhookVerificationError, match="signature"):
        WebhookVerifier(SECRET).verify(headers, raw)


def test_an_old_timestamp_is_refused_even_when_correctly_signed():
    headers, raw = delivery({"kind": "run.status"}, timestamp=int(time.time()) - 3600)
    with pytest.raises(WebhookVerificationError) as caught:
        WebhookVerifier(SECRET, tolerance=300).verify(headers, raw)
    assert caught.value.reason == "stale_timestamp"


def test_a_retried_delivery_is_reported_as_a_duplicate():
    verifier = WebhookVerifier(SECRET)
    headers, raw = delivery({"kind": "call.completed"}, delivery_id="same-id")
    verifier.verify(headers, raw)
    again_headers, again_raw = delivery({"kind": "call.completed"}, delivery_id="same-id")
    with pytest.raises(WebhookVerificationError) as caught:
        verifier.verify(again_headers, again_raw)
    assert caught.value.reason == "duplicate"
    other_headers, other_raw = delivery({"kind": "call.completed"}, delivery_id="other-id")
    assert verifier.verify(other_headers, other_raw) == {"kind": "call.completed"}


def test_the_delivery_log_forgets_after_its_ttl(monkeypatch):
    log = DeliveryLog(ttl=10)
    now = [1000.0]
    monkeypatch.setattr("airlock_sdk.webhooks.time.monotonic", lambda: now[0])
    assert log.first_time("a") and not log.first_time("a")
    now[0] += 11
    assert log.first_time("a")
