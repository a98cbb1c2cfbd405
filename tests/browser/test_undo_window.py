"""The undo window in headless Chromium, on the demo's own data (`seed_demo`): the demo's `support.send_email`
waits 30 s after its approval, since an e-mail cannot be unsent.

- alice (an approver of acme) approves the e-mail; the request page says when it runs and offers Cancel;
  bob (another approver) takes it back with a reason from the inbox, and the e-mail is never sent;
- olivia (a viewer of acme) sees when it runs but no Cancel, and a forged cancel of hers is refused (403);
- gina (admin and approver of globex) finds no such request (404), and her forged cancel changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from runs import demo_tools
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = (
    ROOT / "docs" / "screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
)
FORGED_CANCEL = """async (url) => {
  const token = document.querySelector("[name=csrfmiddlewaretoken]").value;
  const response = await fetch(url, {method: "POST", headers: {"X-CSRFToken": token},
                                     body: new URLSearchParams({reason: "forged"})});
  return response.status;
}"""


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    assert mail.delay_seconds == 30
    return {"mail": mail, "users": {u.username: u for u in get_user_model().objects.all()}}


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def _approve_the_mail(server, demo, login_as):
    page = login_as(demo["users"]["alice"])
    page.goto(f"{server.url}/approvals/{demo['mail'].pk}/")
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("body")).to_contain_text("Runs at")
    return page


def test_an_approver_takes_an_approved_email_back_before_it_is_sent(asgi_live_server, demo, login_as):
    page = _approve_the_mail(asgi_live_server, demo, login_as)
    expect(page.locator(".pill.scheduled").first).to_be_visible()
    expect(page.locator("body")).to_contain_text("undo window is 30 s")
    expect(page.get_by_role("button", name="Cancel the call")).to_be_visible()
    _shot(page, "undo-window.png")

    page = login_as(demo["users"]["bob"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    row = page.locator(f"#scheduled-{demo['mail'].pk}")
    expect(row).to_contain_text("support.send_email")
    _shot(page, "undo-window-inbox.png")
    row.get_by_label(f"Reason to cancel request {demo['mail'].pk}").fill("Ada asked us to hold the e-mail")
    row.get_by_role("button", name="Cancel").click()
    expect(page.locator("body")).to_contain_text("Taken back by")
    expect(page.locator("body")).to_contain_text("Ada asked us to hold the e-mail")

    mail = ApprovalRequest.objects.get(pk=demo["mail"].pk)
    assert mail.status == ApprovalStatus.CANCELLED and mail.cancelled_by_label == "bob"
    assert demo_tools.outbox() == []  # the e-mail never left


def test_a_viewer_and_another_tenant_cannot_cancel(asgi_live_server, demo, login_as):
    _approve_the_mail(asgi_live_server, demo, login_as)
    cancel_url = f"{asgi_live_server.url}/approvals/{demo['mail'].pk}/cancel/"

    page = login_as(demo["users"]["olivia"])  # a viewer of acme
    page.goto(f"{asgi_live_server.url}/approvals/{demo['mail'].pk}/")
    expect(page.locator("body")).to_contain_text("Runs at")
    expect(page.get_by_role("button", name="Cancel the call")).to_have_count(0)
    assert page.evaluate(FORGED_CANCEL, cancel_url) == 403

    page = login_as(demo["users"]["gina"])  # admin and approver of globex
    response = page.goto(f"{asgi_live_server.url}/approvals/{demo['mail'].pk}/")
    assert response.status == 404
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator(f"#scheduled-{demo['mail'].pk}")).to_have_count(0)
    assert page.evaluate(FORGED_CANCEL, cancel_url) == 404

    mail = ApprovalRequest.objects.get(pk=demo["mail"].pk)
    assert mail.status == ApprovalStatus.SCHEDULED and not mail.events.filter(action="cancelled").exists()
