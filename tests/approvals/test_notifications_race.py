"""Exactly one notification per approver and request on PostgreSQL, with workers racing: the
broker is played by the test, which delivers the new-request task to several threads at once."""

import threading

import pytest
from django.core import mail
from django.db import connections

from approvals import tasks
from approvals.models import ApprovalNotice, WebhookDelivery
from approvals.notifications import notify_new_request, save_notification_channels
from tests.approvals.factories import open_request
from tests.approvals.receiver import Receiver

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WORKERS = 4


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def test_racing_workers_post_the_webhook_once_and_mail_each_approver_once(
    monkeypatch, acme, agent, approver, second_approver, receiver
):
    enqueued: list[int] = []
    monkeypatch.setattr(tasks.notify_new_request, "delay", enqueued.append)
    save_notification_channels(tenant=acme, user=None, webhook_url=receiver.url, email_enabled=True)
    request = open_request(tenant=acme, agent=agent)
    assert enqueued == [request.pk] and mail.outbox == []

    barrier = threading.Barrier(WORKERS)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=10)
            notify_new_request(approval_id=request.pk)
        except BaseException as exc:  # surfaced below: a thread's exception is otherwise lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert WebhookDelivery.objects.filter(approval=request).count() == 1 and len(receiver.requests) == 1
    assert ApprovalNotice.objects.filter(approval=request).count() == 2
    assert sorted(m.to[0] for m in mail.outbox) == sorted([approver.email, second_approver.email])
