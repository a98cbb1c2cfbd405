"""Issue 13 in headless Chromium, on the demo's own data (`seed_demo`):

- alice (an approver of acme) opens the confidential refund request, reads the order and the amount,
  approves with an edited amount after seeing the diff, and follows the link to the run, where the
  executed outcome is shown;
- olivia (a viewer of acme) sees no argument value anywhere: card, request page, htmx partials, the
  approver API.
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
SCREENSHOTS = ROOT / "docs" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
REFUND_NOTE = "Arrived with a cracked screen; photo in ticket 8841."


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    refund = ApprovalRequest.objects.get(skill_name="billing.create_refund_request", status=ApprovalStatus.PENDING)
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    return {"refund": refund, "mail": mail, "users": {u.username: u for u in get_user_model().objects.all()}}


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_an_approver_reads_edits_and_follows_a_confidential_refund(asgi_live_server, demo, login_as):
    page = login_as(demo["users"]["alice"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    card = page.locator(f"#approval-{demo['refund'].pk}")
    expect(card.locator("[data-field=order_id]")).to_contain_text("ord_5001")
    expect(card.locator("[data-field=amount_cents]")).to_contain_text("EUR 129.00")
    expect(card.locator("[data-field=note]")).to_contain_text(REFUND_NOTE)
    expect(card.locator(".does")).to_contain_text("in-process function demo.create_refund_request")
    mail = page.locator(f"#approval-{demo['mail'].pk}")
    expect(mail.locator(".email")).to_contain_text("ada@example.org")
    expect(mail.locator(".email .body")).to_contain_text("Hello Ada,")
    _shot(page, "inbox.png")

    page.goto(f"{asgi_live_server.url}/approvals/{demo['refund'].pk}/")
    _shot(page, "approval-request.png")
    page.get_by_text("Approve with edited arguments").click()
    box = page.locator(".edit-form textarea")
    box.fill(box.input_value().replace('"amount_cents": 12900', '"amount_cents": 9900'))
    page.get_by_role("button", name="Review changes").click()
    diff = page.locator(".diff")
    expect(diff).to_contain_text("/amount_cents")
    expect(diff.locator(".from")).to_have_text("12900")
    expect(diff.locator(".to")).to_have_text("9900")
    page.locator("[data-action=approve-edited]").click()

    expect(page.locator("h1 .pill")).to_have_text("executed")
    page.get_by_role("link", name="See the run").click()
    expect(page.locator("body")).to_contain_text("billing.create_refund_request")
    expect(page.locator("body")).to_contain_text("succeeded")
    _shot(page, "run.png")
    page.get_by_role("link", name="Open the trace timeline").click()
    expect(page.locator("body")).to_contain_text("approval")
    _shot(page, "timeline.png")
    [refund] = demo_tools.refunds().values()  # the demo downstream received exactly the edited refund
    assert refund["amount_cents"] == 9900 and refund["order_id"] == "ord_5001"


def test_a_viewer_never_sees_the_arguments(asgi_live_server, demo, login_as):
    page = login_as(demo["users"]["olivia"])  # a viewer of acme, not an approver
    values = ("ord_5001", REFUND_NOTE, "129.00", "ada@example.org", "Hello Ada")
    for path in (
        f"/approvals/{demo['refund'].pk}/",
        f"/approvals/{demo['mail'].pk}/",
        f"/approvals/{demo['refund'].pk}/card/",
        "/approvals/",
        "/approvals/?partial=list",
        f"/api/v1/approvals/{demo['refund'].pk}",
        f"/api/v1/approvals/{demo['mail'].pk}",
        "/api/v1/approvals?status=all",
    ):
        response = page.request.get(f"{asgi_live_server.url}{path}")
        assert response.status in (200, 404), (path, response.status)
        text = response.text()
        for value in values:
            assert value not in text, f"{value!r} shown to a viewer at {path}"
    page.goto(f"{asgi_live_server.url}/approvals/{demo['refund'].pk}/")
    expect(page.locator(".sealed-note")).to_contain_text("Only approvers of acme see the arguments")
