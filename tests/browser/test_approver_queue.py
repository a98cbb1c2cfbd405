"""The approvers' queue in headless Chromium, on the demo's own data (`seed_demo`) and two more of its refunds
for Ada, asked through the demo's own gate path, so that acme's billing approver (alice) has like requests:

- alice finds the three refunds grouped, as loaded and after a reload, opens the group, reads a card's context
  ("3rd refund for cus_ada100 this week") and approves all three at once; each is decided and audited alone;
- alice switches to the compact list and finds it again after a reload, then goes back to full cards;
- alice claims the e-mail card; bob (who approves e-mails too) sees "alice is looking at this" live and after
  a reload, and sees it go when alice leaves.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from playwright.sync_api import expect

from approvals.demo import CALLS
from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus
from console.models import Agent
from runs import demo_tools
from runs.gate import process_batch
from runs.services import start_run
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = (
    ROOT / "docs" / "screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
)
REFUND = "billing.create_refund_request"


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    agent = Agent.objects.get(tenant__slug="acme", name="support-bot")
    for n in (2, 3):  # Ada asks again, twice: the same agent, skill and rule
        run = start_run(agent=agent, end_user="cus_ada100", end_user_roles=["customer"], task="Refund Ada again")
        call = {**CALLS[0], "call_id": f"refund-again-{n}"}
        assert process_batch(run=run, calls=[call])[0]["status"] == "approval_required"
    return {u.username: u for u in get_user_model().objects.all()}


def _shot(target, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / name))


def _refunds() -> list[ApprovalRequest]:
    return list(ApprovalRequest.objects.filter(skill_name=REFUND, status=ApprovalStatus.PENDING).order_by("-id"))


def _open_as(browser, server, user):
    """A second person's browser: its own context and session."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": server.url}])
    other = context.new_page()
    other.goto(f"{server.url}/approvals/")
    return other


def test_alice_opens_the_group_of_refunds_and_approves_it_at_once(asgi_live_server, demo, login_as):
    refunds = _refunds()
    assert len(refunds) == 3
    page = login_as(demo["alice"])
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{asgi_live_server.url}/approvals/")
    group = page.locator(f"#group-{refunds[0].pk}")
    expect(group).to_have_attribute("data-group-size", "3")
    page.reload()
    expect(page.locator("#live-status")).to_have_text("live")
    expect(group).to_have_attribute("data-group-size", "3")
    expect(page).to_have_title("(4) Approvals · Airlock")
    _shot(page, "approver-queue-grouped.png")

    group.locator("details.group-members > summary").click()
    card = page.locator(f"#approval-{refunds[0].pk}")
    expect(card).to_be_visible()
    expect(card.locator("[data-history]")).to_contain_text(f"3rd {REFUND} for cus_ada100 this week")
    expect(card.locator("[data-history]")).to_contain_text("support-bot, last 30 days: 1 decided, 100% declined")
    _shot(card, "approver-queue-card-context.png")

    group.locator(".group-decide input[name=reason]").fill("Ada's three requests are one damaged order; refund each.")
    group.locator("[data-action=approve-group]").click()
    result = page.locator("[data-bulk-result]")
    expect(result.locator("li.done")).to_have_count(3)
    expect(page.locator(f"#group-{refunds[0].pk}")).to_have_count(0)
    for refund in refunds:
        refund.refresh_from_db()
        assert refund.status != ApprovalStatus.PENDING and refund.decided_by == demo["alice"]
        assert ApprovalEvent.objects.filter(request=refund, action="approved", actor=demo["alice"]).count() == 1


def test_alice_switches_to_the_compact_list_and_finds_it_after_a_reload(asgi_live_server, demo, login_as):
    page = login_as(demo["alice"])
    page.set_viewport_size({"width": 1280, "height": 700})
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#pending-list")).not_to_have_class("compact")
    page.locator("#layout-toggle").click()
    expect(page.locator("#pending-list")).to_have_class("compact")
    expect(page.locator("#layout-toggle")).to_have_text("Full cards")
    page.reload()
    expect(page.locator("#pending-list")).to_have_class("compact")
    page.locator(f"#group-{_refunds()[0].pk} details.group-members > summary").click()
    expect(page.locator("#live-status")).to_have_text("live")
    _shot(page, "approver-queue-compact.png")
    page.locator("#layout-toggle").click()
    expect(page.locator("#pending-list")).not_to_have_class("compact")


def test_bob_sees_alices_claim_live_and_after_a_reload_until_she_leaves(asgi_live_server, demo, login_as, browser):
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    alice = login_as(demo["alice"])
    alice.goto(f"{asgi_live_server.url}/approvals/")
    bob = _open_as(browser, asgi_live_server, demo["bob"])
    for page in (alice, bob):
        expect(page.locator("#live-status")).to_have_text("live")

    alice.locator(f"#approval-{mail.pk} [data-claim-button]").click()
    expect(alice.locator(f"#approval-{mail.pk} .claim-note")).to_have_text("You are looking at this")
    bobs_card = bob.locator(f"#approval-{mail.pk}")
    expect(bobs_card.locator(".claim-note")).to_have_text("alice is looking at this")
    expect(bobs_card).to_have_class("approval-card claimed")
    _shot(bobs_card, "approver-queue-claimed.png")

    bob.reload()
    expect(bob.locator("#live-status")).to_have_text("live")
    expect(bob.locator(f"#approval-{mail.pk} .claim-note")).to_have_text("alice is looking at this")

    alice.close()  # she leaves: her socket closes and the claim ends
    expect(bob.locator(f"#approval-{mail.pk} .claim-note")).to_have_text("")
    expect(bob.locator(f"#approval-{mail.pk}")).not_to_have_class("claimed")
    bob.context.close()


FAKE_NOTIFICATIONS = """(() => {
  window.__asked = 0; window.__shown = [];
  class FakeNotification {
    constructor(title, options) { window.__shown.push({title, body: options && options.body}); }
    static requestPermission() {
      window.__asked += 1;
      FakeNotification.permission = "granted";
      return Promise.resolve("granted");
    }
  }
  FakeNotification.permission = "default";
  window.Notification = FakeNotification;
})()"""


def test_alice_turns_on_desktop_notifications_and_a_new_refund_announces_itself(asgi_live_server, demo, login_as):
    page = login_as(demo["alice"])
    page.add_init_script(FAKE_NOTIFICATIONS)  # the browser's own prompt cannot be clicked headless
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#live-status")).to_have_text("live")
    assert page.evaluate("window.__asked") == 0  # never asked on load
    page.locator("#enable-notifications").click()
    expect(page.locator("#enable-notifications")).to_be_hidden()
    assert page.evaluate("window.__asked") == 1

    agent = Agent.objects.get(tenant__slug="acme", name="support-bot")
    run = start_run(agent=agent, end_user="cus_bo200", end_user_roles=["customer"], task="Refund Bo")
    approval_id = process_batch(run=run, calls=[{**CALLS[0], "call_id": "refund-bo"}])[0]["approval_id"]
    expect(page.locator(f"#approval-{approval_id}")).to_be_visible()
    page.wait_for_function("window.__shown.length > 0", timeout=30_000)
    assert page.evaluate("window.__shown") == [{"title": "A request waits for you", "body": REFUND}]
    expect(page).to_have_title("(5) Approvals · Airlock")


def test_bob_selects_the_email_by_keyboard_and_declines_the_selection(asgi_live_server, demo, login_as):
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    page = login_as(demo["bob"])
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#live-status")).to_have_text("live")
    page.reload()
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.locator("[data-action=decline-selected]")).to_be_disabled()
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.locator(f"#approval-{mail.pk} input.select-card")).to_be_checked()
    expect(page.locator("#selected-count")).to_have_text("1 selected")
    page.locator("#bulk-form input[name=reason]").fill("Ada asked us to write by post.")
    page.locator("[data-action=decline-selected]").click()
    expect(page.locator(f"[data-bulk-result] li.done[data-outcome='{mail.pk}']")).to_contain_text("declined")
    expect(page.locator(f"#approval-{mail.pk}")).to_have_count(0)
    mail.refresh_from_db()
    assert mail.status == ApprovalStatus.DECLINED and mail.decline_reason == "Ada asked us to write by post."


class _DroppableInboxSocket:
    """The inbox's websocket, passed through to the real server, that the test can drop as a network would:
    the page then reconnects and, as on every (re)connect, reads its whole list again."""

    def __init__(self, page):
        self.routes = []
        page.route_web_socket(re.compile(r"/ws/approvals/$"), self._connect)

    def _connect(self, route):
        route.connect_to_server()
        self.routes.append(route)

    def drop_and_wait_for_the_list(self, page) -> None:
        with page.expect_response(lambda r: "partial=list" in r.url and r.ok):
            self.routes[-1].close(code=4000, reason="network gone")
        page.wait_for_function("() => !document.querySelector('#pending-list .htmx-request')")


def test_bob_keeps_his_place_and_half_typed_reason_when_the_socket_reconnects(asgi_live_server, demo, login_as):
    """Every (re)connect reads the list again, which can be while a person is typing: the card must stay the
    same element, selected, with the reason field focused, holding what was typed, the cursor where it was."""
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    page = login_as(demo["bob"])
    socket = _DroppableInboxSocket(page)
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#live-status")).to_have_text("live")
    page.keyboard.press("j")
    page.keyboard.press("d")
    reason = page.locator(f"#approval-{mail.pk} .decline-form input[name=reason]")
    expect(reason).to_be_focused()
    page.keyboard.type("Ada asked us ")
    card = page.evaluate_handle(f"document.getElementById('approval-{mail.pk}')")

    socket.drop_and_wait_for_the_list(page)

    expect(page.locator("#live-status")).to_have_text("live")
    assert page.evaluate(f"(card) => card === document.getElementById('approval-{mail.pk}')", card), "morphed"
    expect(page.locator(f"#approval-{mail.pk}")).to_have_class(re.compile(r"\bselected\b"))
    expect(reason).to_be_focused()
    expect(reason).to_have_value("Ada asked us ")
    page.keyboard.type("to write by post.")
    page.keyboard.press("Enter")
    expect(page.locator(f"#approval-{mail.pk}")).to_contain_text("declined")
    mail.refresh_from_db()
    assert mail.status == ApprovalStatus.DECLINED and mail.decline_reason == "Ada asked us to write by post."


def test_alices_decision_note_stays_when_the_socket_reconnects(asgi_live_server, demo, login_as):
    """A decided card becomes a note for a few seconds; the list read again on a reconnect no longer holds the
    request, and must not take the note away before its time."""
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    page = login_as(demo["alice"])
    socket = _DroppableInboxSocket(page)
    page.goto(f"{asgi_live_server.url}/approvals/")
    expect(page.locator("#live-status")).to_have_text("live")
    page.locator(f"#approval-{mail.pk} [data-action=approve]").click()
    expect(page.locator(f"#approval-{mail.pk}[data-decided]")).to_contain_text("approved by alice")
    note = page.evaluate_handle(f"document.getElementById('approval-{mail.pk}')")

    socket.drop_and_wait_for_the_list(page)

    # Still on the page, or taken away by its own timer (a slow machine), never by the re-read.
    assert page.evaluate("(note) => note.isConnected || note.dataset.gone === '1'", note)


def test_a_list_read_before_alice_left_does_not_bring_her_claim_back(asgi_live_server, demo, login_as, browser):
    """Bob's list is read again on a reconnect; the answer was rendered while alice still held the card, and
    arrives after the socket said she let go. Her claim must stay gone: the newer live event wins."""
    mail = ApprovalRequest.objects.get(skill_name="support.send_email", status=ApprovalStatus.PENDING)
    bob = login_as(demo["bob"])
    socket = _DroppableInboxSocket(bob)
    bob.goto(f"{asgi_live_server.url}/approvals/")
    alice = _open_as(browser, asgi_live_server, demo["alice"])
    for page in (alice, bob):
        expect(page.locator("#live-status")).to_have_text("live")
    alice.locator(f"#approval-{mail.pk} [data-claim-button]").click()
    note = bob.locator(f"#approval-{mail.pk} .claim-note")
    expect(note).to_have_text("alice is looking at this")

    held = []  # the re-read's answer, rendered now (alice's claim in it), handed to the page later
    bob.route(re.compile(r"partial=list"), lambda route: held.append((route, route.fetch())))
    socket.routes[-1].close(code=4000, reason="network gone")
    for _ in range(600):  # a condition with a generous ceiling: the page reconnects and asks for its list
        if held:
            break
        bob.wait_for_timeout(50)
    route, stale = held[0]
    assert "is looking at this" in stale.text()

    alice.context.close()  # she leaves: her socket closes, the claim ends, bob's socket says so
    expect(note).to_have_text("")
    route.fulfill(response=stale)
    bob.wait_for_function("() => !document.querySelector('#pending-list.htmx-request')")
    expect(note).to_have_text("")
    expect(bob.locator(f"#approval-{mail.pk}")).not_to_have_class(re.compile(r"\bclaimed\b"))
