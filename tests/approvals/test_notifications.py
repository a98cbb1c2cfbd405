"""Approver notifications of new requests, seen at the edges: a real local HTTP receiver for the
tenant's Slack-compatible webhook, Django's mail outbox (or a refusing SMTP port) for e-mail."""

import json
import socket
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from approvals import tasks
from approvals.models import (
    ApprovalNotice,
    DeliveryStatus,
    NoticeStatus,
    NotificationPreference,
    NotifyMode,
    TenantNotificationSettings,
    WebhookDelivery,
)
from approvals.notifications import (
    notify_new_request,
    save_notification_channels,
    save_notification_preference,
    send_digest,
    send_due_digests,
)
from approvals.services import decide_approval
from approvals.webhooks import verify
from console.models import Role
from tests.approvals.factories import DECISION, REFUND_SCHEMA, make_run, open_request
from tests.approvals.gate_world import create_active_version, downstream_manifest
from tests.approvals.receiver import Receiver
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SECRET_VALUES = ("c-SECRET-4471", "Grandma Ruth's diagnosis", "tok_live_secret")


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def third_approver(acme):
    return make_user("approver3", tenant=acme, roles=[Role.APPROVER])


def _channels(tenant, url: str, *, email: bool = True) -> TenantNotificationSettings:
    return save_notification_channels(tenant=tenant, user=None, webhook_url=url, email_enabled=email)


def _open(capture, **kwargs):
    with capture(execute=True):
        return open_request(**kwargs)


def _confidential_version():
    body = downstream_manifest(
        "billing.export_statement", schema=REFUND_SCHEMA, version="1.0.0", team_slug="billing-platform"
    )
    body["risk"]["data_classification"] = "confidential"
    return create_active_version(body)


def _everything_sent(receiver) -> str:
    posts = [r.body.decode() for r in receiver.requests]
    mails = [f"{m.subject}\n{m.body}" for m in mail.outbox]
    return "\n".join(posts + mails)


def test_a_new_request_posts_the_webhook_once_and_mails_each_approver_as_they_chose(
    acme, agent, approver, second_approver, third_approver, receiver, django_capture_on_commit_callbacks
):
    channels = _channels(acme, receiver.url)
    save_notification_preference(tenant=acme, user=second_approver, mode=NotifyMode.OFF, digest_minutes=60)
    save_notification_preference(tenant=acme, user=third_approver, mode=NotifyMode.DIGEST, digest_minutes=15)

    request = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)

    [post] = receiver.requests
    body = json.loads(post.body)
    link = f"{django_settings.AIRLOCK_PUBLIC_URL}/approvals/{request.pk}/"
    assert set(body) == {"text", "blocks"}  # what a Slack incoming webhook takes
    assert "billing.create_refund" in body["text"] and "(external)" in body["text"] and link in body["text"]
    assert DECISION["reason"] in json.dumps(body)
    assert verify(
        secret=channels.webhook_secret,
        timestamp=post.headers["X-Airlock-Timestamp"],
        body=post.body,
        signature=post.headers["X-Airlock-Signature"],
    )
    [message] = mail.outbox
    assert message.to == [approver.email]
    assert "billing.create_refund" in message.subject and "external" in message.subject
    assert DECISION["reason"] in message.body and link in message.body
    assert "c-42" in message.body and "tok_live_secret" not in message.body  # internal skill: masked arguments

    with django_capture_on_commit_callbacks(execute=True):  # the task delivered again, or a second worker
        notify_new_request(approval_id=request.pk)
    assert len(receiver.requests) == 1 and len(mail.outbox) == 1
    assert WebhookDelivery.objects.get(approval=request).status == DeliveryStatus.DELIVERED
    assert ApprovalNotice.objects.get(approval=request).status == NoticeStatus.SENT


def test_a_confidential_requests_arguments_appear_in_no_notification(
    acme, agent, approver, third_approver, receiver, django_capture_on_commit_callbacks
):
    _channels(acme, receiver.url)
    save_notification_preference(tenant=acme, user=third_approver, mode=NotifyMode.DIGEST, digest_minutes=15)
    arguments = {"customer_id": "c-SECRET-4471", "amount_cents": 98765, "note": "Grandma Ruth's diagnosis"}
    version = _confidential_version()
    request = _open(
        django_capture_on_commit_callbacks, tenant=acme, agent=agent, skill_version=version, arguments=arguments
    )
    _time_passes(NotificationPreference.objects.get(user=third_approver), 16)
    send_due_digests()

    assert len(receiver.requests) == 1 and len(mail.outbox) == 2  # one at once, one digest
    sent = _everything_sent(receiver)
    assert "billing.export_statement" in sent and f"/approvals/{request.pk}/" in sent
    for value in (*SECRET_VALUES, "98765", "987.65", request.arguments_sha256):
        assert value not in sent
    assert "withheld" in sent


def test_another_tenants_approvers_and_webhook_get_nothing(
    acme, globex, agent, approver, outsider, receiver, django_capture_on_commit_callbacks
):
    other = Receiver().start()
    try:
        _channels(acme, receiver.url)
        _channels(globex, other.url)
        _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
        assert other.requests == [] and len(receiver.requests) == 1
        assert [m.to for m in mail.outbox] == [[approver.email]]
        assert outsider.email not in json.dumps([m.to for m in mail.outbox])
    finally:
        other.stop()


def test_the_person_the_run_acts_for_is_not_asked_to_approve_it(acme, agent, django_capture_on_commit_callbacks):
    make_user("approver", tenant=acme, roles=[Role.APPROVER])
    make_user("dana", tenant=acme, roles=[Role.APPROVER])
    _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, end_user="dana")
    assert [m.to for m in mail.outbox] == [["approver@example.com"]]


def test_a_broker_that_is_down_loses_the_notice_not_the_request(
    monkeypatch, acme, agent, approver, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.notify_new_request, "delay", broker_down)
    request = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    assert request.is_pending and mail.outbox == []


def test_with_email_off_only_the_webhook_posts(acme, agent, approver, receiver, django_capture_on_commit_callbacks):
    _channels(acme, receiver.url, email=False)
    _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    assert len(receiver.requests) == 1 and mail.outbox == []


def _time_passes(preference, minutes: int) -> None:
    """The approver's last digest was `minutes` ago (the requests keep their own times)."""
    NotificationPreference.objects.filter(pk=preference.pk).update(
        last_digest_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_a_digest_groups_the_still_pending_requests_since_the_last_one(
    acme, agent, approver, second_approver, django_capture_on_commit_callbacks
):
    preference = save_notification_preference(tenant=acme, user=approver, mode=NotifyMode.DIGEST, digest_minutes=15)
    save_notification_preference(tenant=acme, user=second_approver, mode=NotifyMode.OFF, digest_minutes=15)
    run = make_run(tenant=acme, agent=agent)
    first = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    second = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    decided = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    decide_approval(approval=decided, user=second_approver, decision="decline", reason="no")
    assert mail.outbox == []  # nobody wants them at once

    _time_passes(preference, 10)
    assert send_due_digests() == 0  # not due yet
    _time_passes(preference, 16)
    assert send_due_digests() == 2
    [digest] = mail.outbox
    assert digest.to == [approver.email] and "2 requests" in digest.subject
    assert f"/approvals/{first.pk}/" in digest.body and f"/approvals/{second.pk}/" in digest.body
    assert f"/approvals/{decided.pk}/" not in digest.body

    _time_passes(preference, 16)
    assert send_due_digests() == 0  # nothing new (the two are not mailed again): no empty digest
    later = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    _time_passes(preference, 16)
    assert send_due_digests() == 1
    assert len(mail.outbox) == 2 and f"/approvals/{later.pk}/" in mail.outbox[1].body
    assert f"/approvals/{first.pk}/" not in mail.outbox[1].body
    assert ApprovalNotice.objects.filter(user=approver, mode=NotifyMode.DIGEST, status=NoticeStatus.SENT).count() == 3


def test_a_digest_beat_running_twice_mails_once(acme, agent, approver, django_capture_on_commit_callbacks):
    preference = save_notification_preference(tenant=acme, user=approver, mode=NotifyMode.DIGEST, digest_minutes=5)
    _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    _time_passes(preference, 6)
    stale = NotificationPreference.objects.get(user=approver)
    assert send_due_digests() == 1
    assert send_digest(preference=stale) == 0  # a second beat that read the row before the first claimed it
    assert len(mail.outbox) == 1


def test_a_failing_receiver_is_retried_then_shown_failed_to_the_admin(
    settings, client, acme, agent, approver, tenant_admin, receiver, django_capture_on_commit_callbacks
):
    settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.statuses = [500] * 5
    _channels(acme, receiver.url)
    request = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    assert len(receiver.requests) == 3
    assert len({r.headers["X-Airlock-Delivery"] for r in receiver.requests}) == 1
    delivery = WebhookDelivery.objects.get(approval=request)
    assert (delivery.status, delivery.attempts, delivery.last_error) == (DeliveryStatus.FAILED, 3, "HTTP 500")

    client.force_login(tenant_admin)
    page = client.get(reverse("approvals:notification_settings", args=["acme"])).content.decode()
    assert "1 notification failed" in page and "HTTP 500" in page and f"#{request.pk}" in page
    home = client.get(reverse("console:home")).content.decode()
    assert "Failed notifications · acme" in home
    client.force_login(approver)  # not an admin: no such card
    assert "Failed notifications" not in client.get(reverse("console:home")).content.decode()


def test_a_webhook_the_guard_now_refuses_is_blocked_not_posted(
    settings, client, acme, agent, approver, tenant_admin, receiver, django_capture_on_commit_callbacks
):
    _channels(acme, receiver.url)  # saved while private addresses were allowed (a development setup)
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    request = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    delivery = WebhookDelivery.objects.get(approval=request)
    assert delivery.status == DeliveryStatus.BLOCKED and receiver.requests == []
    assert "https://" in delivery.last_error
    client.force_login(tenant_admin)
    page = client.get(reverse("approvals:notification_settings", args=["acme"])).content.decode()
    assert "1 notification failed" in page and "blocked" in page


def test_the_admin_page_reads_a_fixed_number_of_queries(
    client, acme, agent, approver, second_approver, tenant_admin, receiver, django_capture_on_commit_callbacks
):
    _channels(acme, receiver.url)
    client.force_login(tenant_admin)
    url = reverse("approvals:notification_settings", args=["acme"])
    run = make_run(tenant=acme, agent=agent)
    _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    with CaptureQueriesContext(connection) as one:
        client.get(url)
    for _ in range(3):
        _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent, run=run)
    with CaptureQueriesContext(connection) as four:
        page = client.get(url).content.decode()
    assert page.count("<tr><td><a href") == 4 + 8  # four posts, eight mails
    assert len(four) == len(one)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_mail_server_is_retried_then_shown_failed(
    settings, client, acme, agent, approver, tenant_admin, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", _closed_port(), 1
    settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS = 2
    request = _open(django_capture_on_commit_callbacks, tenant=acme, agent=agent)
    notice = ApprovalNotice.objects.get(approval=request)
    assert (notice.status, notice.attempts) == (NoticeStatus.FAILED, 2)
    assert "ConnectionRefusedError" in notice.last_error

    client.force_login(tenant_admin)
    page = client.get(reverse("approvals:notification_settings", args=["acme"])).content.decode()
    assert "1 notification failed" in page and "ConnectionRefusedError" in page


# --- the console pages -------------------------------------------------------------------------------


def _save_channels(client, url: str, email: bool = True):
    data = {"webhook_url": url, **({"email_enabled": "on"} if email else {})}
    return client.post(reverse("approvals:notification_settings", args=["acme"]), data)


def test_an_admin_sets_the_webhook_and_turns_email_off(settings, client, tenant_admin, acme):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    client.force_login(tenant_admin)
    assert client.get(reverse("approvals:notification_settings", args=["acme"])).status_code == 200
    response = _save_channels(client, "https://hooks.slack.com/services/T000/B000/XXXX", email=False)
    assert response.status_code == 302
    channels = TenantNotificationSettings.objects.get(tenant=acme)
    assert channels.webhook_url.startswith("https://hooks.slack.com/") and channels.email_enabled is False
    assert channels.updated_by == tenant_admin


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://127.0.0.1:9000/hook", "must start with https://"),
        ("https://127.0.0.1/hook", "loopback"),
        ("https://169.254.169.254/latest", "link-local"),
        ("https://10.1.2.3/hook", "private range"),
        ("http://hooks.example.com/x", "must start with https://"),
        ("not a url at all", "Enter a full https:// URL"),
        ("ftp://hooks.example.com/x", "Enter a full https:// URL"),
    ],
)
def test_a_bad_webhook_url_is_refused_with_a_clear_error(settings, client, tenant_admin, acme, url, error):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False  # production's rules
    client.force_login(tenant_admin)
    response = _save_channels(client, url)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not TenantNotificationSettings.objects.filter(tenant=acme).exists()


def test_only_the_tenants_admin_may_change_the_webhook(client, acme, approver, viewer, outsider):
    for user, status in ((approver, 403), (viewer, 403), (outsider, 404)):
        client.force_login(user)
        assert _save_channels(client, "https://hooks.slack.com/services/T/B/X").status_code == status
        assert client.get(reverse("approvals:notification_settings", args=["acme"])).status_code == status
    assert not TenantNotificationSettings.objects.exists()


def test_the_settings_page_refuses_other_methods(client, tenant_admin):
    client.force_login(tenant_admin)
    assert client.put(reverse("approvals:notification_settings", args=["acme"])).status_code == 405


def test_an_approver_chooses_a_digest_for_themselves(client, acme, approver):
    client.force_login(approver)
    page = client.get(reverse("approvals:notification_preferences"))
    assert page.status_code == 200 and "Immediately" in page.content.decode()
    url = reverse("approvals:save_preference", args=["acme"])
    response = client.post(url, {"mode": "digest", "digest_minutes": "30"})
    assert response.status_code == 302
    preference = NotificationPreference.objects.get(user=approver, tenant=acme)
    assert (preference.mode, preference.digest_minutes) == ("digest", 30)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"mode": "digest", "digest_minutes": "1"}, "greater than or equal to 5"),
        ({"mode": "digest", "digest_minutes": "100000"}, "less than or equal to 1440"),
        ({"mode": "hourly", "digest_minutes": "30"}, "Select a valid choice"),
        ({"mode": "digest", "digest_minutes": "soon"}, "Enter a whole number"),
    ],
)
def test_a_bad_preference_is_refused_with_a_clear_error(client, acme, approver, data, error):
    client.force_login(approver)
    response = client.post(reverse("approvals:save_preference", args=["acme"]), data)
    assert response.status_code == 400 and error in response.content.decode()
    assert not NotificationPreference.objects.exists()


def test_only_the_tenants_approvers_have_a_preference(client, acme, viewer, outsider):
    url = reverse("approvals:save_preference", args=["acme"])
    for user, status in ((viewer, 403), (outsider, 404)):
        client.force_login(user)
        assert client.post(url, {"mode": "off", "digest_minutes": "60"}).status_code == status
    client.force_login(viewer)
    assert client.get(url).status_code == 405
    assert not NotificationPreference.objects.exists()
