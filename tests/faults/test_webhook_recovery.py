"""A webhook receiver that fails, then recovers: the event arrives, is accepted once, and a re-run of
the delivery task posts nothing more. The receiver de-duplicates by X-Airlock-Delivery (the SDK's
verifier), which is what makes at-least-once delivery safe."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from airlock_sdk.webhooks import WebhookVerificationError, WebhookVerifier

from approvals.delivery import attempt_delivery
from approvals.models import DeliveryStatus, WebhookDelivery
from approvals.services import decide_approval
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "whsec-" + "s" * 32


class FlakyReceiver:
    """Answers 503 `failures` times (the receiver is restarting), then verifies and accepts."""

    def __init__(self, failures: int, secret_of) -> None:
        self.failures = failures
        self.posts: list[str] = []
        self.accepted: list[dict] = []
        self.duplicates = 0
        self.secret_of = secret_of
        self.verifiers: dict[str, WebhookVerifier] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append(self.headers["X-Airlock-Delivery"])
                if receiver.failures > 0:
                    receiver.failures -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                run_id = self.path.rsplit("/", 1)[-1]
                verifier = receiver.verifiers.setdefault(run_id, WebhookVerifier(receiver.secret_of(run_id)))
                try:
                    receiver.accepted.append(verifier.verify(dict(self.headers), body))
                except WebhookVerificationError as exc:
                    if exc.reason != "duplicate":
                        raise
                    receiver.duplicates += 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, run_id: str = "") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook/{run_id}"


def test_a_receiver_that_fails_then_recovers_gets_each_event_once(acme, agent, approver, settings):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = True
    receiver = FlakyReceiver(failures=2, secret_of=lambda run_id: SECRET)
    try:
        request = open_request(tenant=acme, agent=agent, callback_url=receiver.url(), webhook_secret=SECRET)
        run = request.call.run
        decide_approval(approval=request, user=approver, decision="approve")  # eager: decided, executed, delivered
        deliveries = WebhookDelivery.objects.filter(run=run)
        assert deliveries.exists()
        assert set(deliveries.values_list("status", flat=True)) == {DeliveryStatus.DELIVERED}
        kinds = [event["kind"] for event in receiver.accepted]
        assert kinds.count("call.completed") == 1, kinds
        assert len(receiver.accepted) == deliveries.count()  # every event accepted exactly once
        first = deliveries.order_by("created_at").first()
        assert first.attempts == 3 and receiver.posts.count(str(first.pk)) == 3  # two 503s, then delivered

        # The task runs again (a redelivered message after a worker crash): nothing is posted again.
        posted = len(receiver.posts)
        for delivery in deliveries:
            attempt_delivery(delivery_id=str(delivery.pk))
        assert len(receiver.posts) == posted

        # Even if the sender did repeat a delivered event, the receiver drops it by delivery id.
        delivery = deliveries.order_by("created_at").first()
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.PENDING)
        attempt_delivery(delivery_id=str(delivery.pk))
        assert receiver.duplicates == 1
        assert len(receiver.accepted) == deliveries.count()
    finally:
        receiver.server.shutdown()
