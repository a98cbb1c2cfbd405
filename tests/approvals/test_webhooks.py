import json

import pytest
from airlock_sdk.webhooks import DeliveryLog, WebhookVerifier

from approvals.delivery import backoff_seconds
from approvals.models import DeliveryStatus, WebhookDelivery
from approvals.services import decide_approval
from approvals.webhooks import UnsafeCallbackURL, check_callback_url, sign, verify
from tests.approvals.factories import make_run, open_request
from tests.approvals.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "whsec-test-secret"


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def test_signature_is_hmac_over_timestamp_and_body():
    body = b'{"id":1}'
    signature = sign(secret=SECRET, timestamp=1700000000, body=body)
    import hashlib
    import hmac

    assert signature == "v1=" + hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert not verify(secret=SECRET, timestamp="1700000000", body=body, signature=signature)  # stale


def test_events_are_delivered_signed_and_retried_with_the_same_delivery_id(
    settings, acme, agent, approver, executions, receiver, django_capture_on_commit_callbacks
):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = True
    receiver.statuses = [500, 503]  # the first two attempts fail, the third succeeds
    with django_capture_on_commit_callbacks(execute=True):
        request = open_request(tenant=acme, agent=agent, callback_url=receiver.url, webhook_secret=SECRET)
    assert len(receiver.requests) == 3
    ids = {r.headers["X-Airlock-Delivery"] for r in receiver.requests}
    assert len(ids) == 1
    verifier = WebhookVerifier(SECRET, deliveries=DeliveryLog())
    event = verifier.verify(receiver.requests[-1].headers, receiver.requests[-1].body)
    assert event["kind"] == "approval.requested" and event["payload"]["approval_id"] == request.pk
    for attempt in receiver.requests:  # every attempt carries a valid signature over the same body
        assert verify(
            secret=SECRET,
            timestamp=attempt.headers["X-Airlock-Timestamp"],
            body=attempt.body,
            signature=attempt.headers["X-Airlock-Signature"],
        )
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, str(delivery.id)) == (DeliveryStatus.DELIVERED, 3, ids.pop())

    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=request, user=approver, decision="approve")
    kinds = [json.loads(r.body)["kind"] for r in receiver.requests[3:]]
    assert kinds == ["approval.decided", "call.completed", "run.status"]
    completed = json.loads(receiver.requests[4].body)
    assert completed["payload"]["result"]["status"] == "ok"


def test_delivery_gives_up_after_max_attempts(settings, acme, agent, receiver, django_capture_on_commit_callbacks):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = True
    settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.statuses = [500] * 10
    with django_capture_on_commit_callbacks(execute=True):
        open_request(tenant=acme, agent=agent, callback_url=receiver.url, webhook_secret=SECRET)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 3 and len(receiver.requests) == 3
    assert delivery.last_error == "HTTP 500"


def test_backoff_is_exponential_and_capped(settings):
    settings.AIRLOCK_WEBHOOK_RETRY_BASE_SECONDS = 2.0
    settings.AIRLOCK_WEBHOOK_RETRY_CAP_SECONDS = 60.0
    assert [backoff_seconds(n, jitter=False) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]
    assert all(1.0 <= backoff_seconds(1) <= 2.0 for _ in range(50))


def test_private_callbacks_are_blocked_and_nothing_is_sent(
    settings, acme, agent, receiver, django_capture_on_commit_callbacks
):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = False
    with django_capture_on_commit_callbacks(execute=True):
        open_request(tenant=acme, agent=agent, callback_url=receiver.url, webhook_secret=SECRET)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.BLOCKED and "loopback" in delivery.last_error
    assert receiver.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://localhost:8000/",
        "http://169.254.169.254/latest",
        "http://10.0.0.5/",
        "http://192.168.1.1/",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "ftp://example.com/",
        "http:///nohost",
    ],
)
def test_ssrf_checks_refuse_internal_addresses(settings, url):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = False
    with pytest.raises(UnsafeCallbackURL):
        check_callback_url(url)


def test_ssrf_check_accepts_public_addresses(settings):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = False
    check_callback_url("https://93.184.215.14/hook")


def test_runs_without_callback_get_no_deliveries(acme, agent):
    make_run(tenant=acme, agent=agent)
    open_request(tenant=acme, agent=agent)
    assert not WebhookDelivery.objects.exists()
