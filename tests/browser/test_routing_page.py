"""Approval routing in headless Chromium, on the demo's own data (`seed_demo`: acme's billing group is
alice, the `refunds` route sends billing calls to it):

- adam (acme's admin) opens Admin → Approval routing, reads the groups and routes, previews a condition
  on the last requests, adds bob to a new group and a route for e-mails to it;
- bob (an approver of acme outside billing) sees the e-mail request in his inbox, never the refund;
- olivia (a viewer of acme) and alice (an approver, not an admin) are refused the routing page.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalRoute, ApprovalStatus
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = (
    ROOT / "docs" / "screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
)


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    return {
        "refund": pending.get(skill_name="billing.create_refund_request"),
        "mail": pending.get(skill_name="support.send_email"),
        "users": {u.username: u for u in get_user_model().objects.all()},
    }


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_a_tenant_admin_routes_requests_to_a_group(asgi_live_server, demo, login_as):
    page = login_as(demo["users"]["adam"])
    page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"]))
    page.get_by_role("navigation", name="Tenant administration").get_by_role("link", name="Approval routing").click()
    expect(page.locator("h1")).to_have_text("Approval routing")
    expect(page.locator('[data-route="refunds"]')).to_contain_text('skill.namespace == "billing"')
    expect(page.locator('[data-group="billing"]')).to_contain_text("alice")

    page.locator("#id_preview").fill('skill.name == "support.send_email"')
    page.get_by_role("button", name="Try it on the last 50 requests").click()
    expect(page).to_have_url(re.compile(r"preview=.*send_email"), timeout=30_000)  # the GET form's answer
    expect(page.locator("[data-preview-summary]")).to_contain_text(
        "1 of the last 3 requests match"
    )  # the demo: two waiting, one declined
    refund_row = page.locator("[data-preview] tr", has_text="billing.create_refund_request").first
    expect(refund_row).to_contain_text("billing")  # where the current routes send it

    page.locator("#id_group_name").fill("support")
    page.get_by_role("button", name="Create the group").click()
    support = page.locator('[data-group="support"]')
    support.get_by_label("Approver to add to support").select_option(label="bob")
    support.get_by_role("button", name="Add").click()
    expect(page.locator('[data-group="support"]')).to_contain_text("bob")

    form = page.locator("[data-route-form]")
    form.get_by_label("Name").fill("customer e-mail")
    form.get_by_label("Condition").fill("skill.name ==")
    form.get_by_label("Send to").select_option(label="support")
    form.get_by_role("button", name="Add the route").click()
    expect(page.locator(".errorlist")).to_contain_text("Syntax error")  # refused, with the reason
    form = page.locator("[data-route-form]")
    form.get_by_label("Condition").fill('skill.name == "support.send_email"')
    form.get_by_role("button", name="Add the route").click()
    expect(page.locator('[data-route="customer e-mail"]')).to_contain_text("support")
    assert list(ApprovalRoute.objects.filter(tenant__slug="acme").values_list("name", flat=True)) == [
        "refunds",
        "customer e-mail",
    ]
    page.locator("#id_preview").fill('skill.namespace == "billing"')
    page.get_by_role("button", name="Try it on the last 50 requests").click()
    expect(page).to_have_url(re.compile(r"preview=.*billing"), timeout=30_000)  # the GET form's answer
    expect(page.locator("[data-preview-summary]")).to_contain_text(
        "2 of the last 3 requests match"
    )  # the waiting refund and the one declined while seeding
    _shot(page, "approval-routing.png")


def test_an_approver_outside_billing_sees_only_what_is_routed_to_him(asgi_live_server, demo, login_as):
    page = login_as(demo["users"]["bob"])
    page.goto(asgi_live_server.url + reverse("approvals:inbox"))
    expect(page.locator(f"#approval-{demo['mail'].pk}")).to_be_visible()
    expect(page.locator(f"#approval-{demo['refund'].pk}")).to_have_count(0)
    expect(page.locator("#pending-count")).to_have_text("1")
    page.goto(asgi_live_server.url + reverse("approvals:detail", args=[demo["refund"].pk]))
    expect(page.locator("body")).not_to_contain_text("Approve")  # readable as a member, not decidable

    alice = login_as(demo["users"]["alice"])
    alice.goto(asgi_live_server.url + reverse("approvals:inbox"))
    expect(alice.locator(f"#approval-{demo['refund'].pk}")).to_contain_text("group billing")
    _shot(alice, "approval-routing-inbox.png")


@pytest.mark.parametrize("who", ["olivia", "alice"])
def test_members_who_are_not_admins_are_refused_the_page(who, asgi_live_server, demo, login_as):
    page = login_as(demo["users"][who])
    response = page.goto(asgi_live_server.url + reverse("approvals:routing", args=["acme"]))
    assert response.status == 403
    expect(page.locator("body")).to_contain_text("admin")
    expect(page.locator("[data-route-form]")).to_have_count(0)
