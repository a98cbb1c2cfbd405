"""The notification pages in a real browser: an approver picks a digest for themselves; a tenant admin
sees the deliveries that failed and gets a clear error for a webhook URL Airlock may not call."""

import os
import socket
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from approvals.models import NotificationPreference
from approvals.notifications import notify_new_request, save_notification_channels
from tests.approvals.factories import open_request

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("AIRLOCK_SHOTS", Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_approver_chooses_a_digest(asgi_live_server, login_as, approver, acme):
    page = login_as(approver)
    page.goto(asgi_live_server.url + reverse("approvals:inbox"))
    page.screenshot(path=str(SHOTS / "inbox-with-notifications-link.png"))
    page.get_by_role("link", name="Notifications").click()
    expect(page.locator("h1")).to_have_text("Your notifications")
    panel = page.locator('[data-tenant="acme"]')
    expect(panel).to_contain_text("Now: immediately (the default).")
    panel.get_by_label("A digest every N minutes").check()
    panel.get_by_label("Digest every (minutes)").fill("30")
    panel.get_by_role("button", name="Save").click()
    expect(page.locator("ul.messages")).to_contain_text("e-mailed to you a digest every 30 minutes")
    expect(panel).to_contain_text("Now: a digest every 30 minutes.")
    page.screenshot(path=str(SHOTS / "notification-preferences.png"), full_page=True)
    assert NotificationPreference.objects.get(user=approver).digest_minutes == 30


def test_an_admin_sees_failed_deliveries_and_a_refused_url(
    settings, asgi_live_server, login_as, tenant_admin, approver, agent, acme
):
    settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS = 2
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", _closed_port(), 1
    save_notification_channels(
        tenant=acme, user=tenant_admin, webhook_url=f"http://127.0.0.1:{_closed_port()}/hook", email_enabled=True
    )
    request = open_request(tenant=acme, agent=agent)  # committed: the on-commit notify already ran
    notify_new_request(approval_id=request.pk)

    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("approvals:notification_settings", args=["acme"]))
    expect(page.locator("[data-delivery-problems]")).to_contain_text("2 notifications failed")
    expect(page.locator("[data-webhook-deliveries]")).to_contain_text("failed")
    expect(page.locator("[data-mail-notices]")).to_contain_text("ConnectionRefusedError")
    page.screenshot(path=str(SHOTS / "notification-settings-failures.png"), full_page=True)

    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False  # production's rules
    page.get_by_label("Webhook URL").fill("https://169.254.169.254/latest/meta-data")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".errorlist")).to_contain_text("link-local")
    page.screenshot(path=str(SHOTS / "notification-settings-refused.png"), full_page=True)
