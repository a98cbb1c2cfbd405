"""The inbox as a person first sees it: cards already pending when the page loads (the demo's own data,
`seed_demo`), as each approver of the demo, before and after a reload, decided by button and by keyboard.

A card routed to you always carries Approve and Decline; one routed elsewhere never reaches your inbox.
The live-arrival path is covered by tests/approvals/test_browser_inbox.py.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from approvals import queries
from approvals.models import ApprovalRequest, ApprovalStatus
from runs import demo_tools
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    return {u.username: u for u in get_user_model().objects.all()}


def _pending_ids(user) -> list[int]:
    return [a.pk for a in queries.pending_for(user, {})]


def _expect_decidable(page, approval_ids: list[int]) -> None:
    expect(page.locator("article.approval-card")).to_have_count(len(approval_ids))
    for pk in approval_ids:
        card = page.locator(f"#approval-{pk}")
        expect(card.locator("[data-action=approve]")).to_be_enabled()
        expect(card.locator("[data-action=decline]")).to_be_enabled()
        expect(card.locator("[data-not-routed]")).to_have_count(0)


@pytest.mark.parametrize("username", ["alice", "bob", "root"])
def test_every_loaded_card_routed_to_an_approver_has_its_buttons_after_a_reload_too(
    asgi_live_server, demo, login_as, username
):
    pending = _pending_ids(demo[username])
    assert pending, f"the demo leaves requests for {username}"
    page = login_as(demo[username])
    page.goto(f"{asgi_live_server.url}/approvals/")
    _expect_decidable(page, pending)
    page.reload()
    _expect_decidable(page, pending)


def test_alice_decides_the_loaded_refund_by_keyboard_and_the_email_by_button(asgi_live_server, demo, login_as):
    refund = ApprovalRequest.objects.get(skill_name="billing.create_refund_request", status=ApprovalStatus.PENDING)
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    page = login_as(demo["alice"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    page.reload()
    _expect_decidable(page, [refund.pk, mail.pk])

    cards = page.locator("article.approval-card")
    position = [cards.nth(i).get_attribute("data-approval-id") for i in range(cards.count())].index(str(refund.pk))
    for _ in range(position + 1):
        page.keyboard.press("j")
    expect(page.locator(f"#approval-{refund.pk}")).to_have_class("approval-card selected")
    page.keyboard.press("a")
    expect(page.locator(f"#approval-{refund.pk}[data-decided]")).to_contain_text("approved by alice")

    page.locator(f"#approval-{mail.pk} [data-action=approve]").click()
    expect(page.locator(f"#approval-{mail.pk}[data-decided]")).to_contain_text("approved by alice")
    refund.refresh_from_db()
    mail.refresh_from_db()
    assert refund.status != ApprovalStatus.PENDING and refund.decided_by == demo["alice"]
    assert mail.status != ApprovalStatus.PENDING and mail.decided_by == demo["alice"]


def test_bob_declines_the_loaded_email_by_keyboard_and_never_sees_the_billing_refund(asgi_live_server, demo, login_as):
    refund = ApprovalRequest.objects.get(skill_name="billing.create_refund_request", status=ApprovalStatus.PENDING)
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    page = login_as(demo["bob"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    _expect_decidable(page, [mail.pk])
    expect(page.locator(f"#approval-{refund.pk}")).to_have_count(0)

    page.keyboard.press("j")
    page.keyboard.press("d")
    expect(page.locator(f"#approval-{mail.pk} .decline-form input[name=reason]")).to_be_focused()
    page.keyboard.type("Wrong customer address.")
    page.keyboard.press("Enter")
    expect(page.locator(f"#approval-{mail.pk}[data-decided]")).to_contain_text("declined by bob")
    mail.refresh_from_db()
    assert mail.status == ApprovalStatus.DECLINED and mail.decline_reason == "Wrong customer address."
