"""Issue 38 (try a draft, skill tests) in headless Chromium, on the demo's own data: olivia, an owner of
billing.create_refund_request, opens the try page of its draft 1.1.0, sees its skill tests pass, runs a
refund against the sandbox and reads the result, the span and the why panel, while the real refund
function is never called. A member of another team gets the 403 page and no Try button."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from console.models import Membership, Role, Team, Tenant
from registry.models import SkillTry
from runs import demo_tools
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
# docs/screenshots only when asked (AIRLOCK_UPDATE_SCREENSHOTS=1), so that a test run leaves the checkout clean
SCREENSHOTS = settings.BASE_DIR / (
    "docs/screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else "test-artifacts/screenshots"
)
SKILL, DRAFT = "billing.create_refund_request", "1.1.0"


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    demo_tools.reset()
    users = {u.username: u for u in get_user_model().objects.all()}
    sam = get_user_model().objects.create_user("sam", password="pw")  # support-tools, not billing-platform
    Membership.objects.create(tenant=Tenant.objects.get(slug="acme"), user=sam, role=Role.VIEWER)
    Team.objects.get(slug="support-tools").members.add(sam)
    return {**users, "sam": sam}


def test_the_owner_tries_a_draft_against_its_sandbox(asgi_live_server, page, login_as, demo):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login_as(demo["olivia"])
    page.goto(asgi_live_server.url + reverse("registry:skill", args=[SKILL]))
    page.locator("tr", has=page.get_by_text(DRAFT, exact=True)).locator("[data-action=try-version]").click()
    expect(page.locator("h1")).to_contain_text(f"Try {SKILL} {DRAFT}")
    expect(page.locator("[data-try=target]")).to_have_text("python:demo.sandbox_refund_request")
    tests = page.locator("[data-try=tests]")
    expect(tests).to_contain_text("passing")
    expect(tests.locator("[data-test]")).to_have_count(3)

    page.locator("input[name=role]").fill("support")
    page.locator("[data-action=try]").click()
    result = page.locator("[data-try=result]")
    expect(result).to_contain_text("rr_sandbox")
    expect(result).to_contain_text("the gate would confirm")
    expect(page.locator("[data-try=span]")).to_contain_text("python:demo.sandbox_refund_request")
    why = page.locator("[data-try=why]")
    expect(why).to_contain_text("Do the arguments match the input schema?")
    expect(why).to_contain_text("sandbox")
    expect(page.locator("[data-try=history] tbody tr")).to_contain_text("olivia")  # the history follows at once
    page.screenshot(path=str(SCREENSHOTS / "try-panel-owner.png"), full_page=True)
    assert demo_tools.refunds() == {}  # the real create_refund_request never ran
    assert SkillTry.objects.get().tried_by == demo["olivia"]

    page.locator("textarea[name=arguments]").fill('{"order_id": "ord_5001", "amount_cents": -1}')
    page.locator("[data-action=try]").click()
    expect(page.locator("[data-try=result] .pill.invalid")).to_be_visible()
    expect(page.locator("[data-try=why]")).to_contain_text("amount_cents")
    page.reload()
    expect(page.locator("[data-try=history] tbody tr")).to_have_count(2)


def test_a_member_of_another_team_cannot_open_the_try_page(asgi_live_server, page, login_as, demo):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login_as(demo["sam"])
    page.goto(asgi_live_server.url + reverse("registry:skill", args=[SKILL]))
    expect(page.locator("h1")).to_contain_text(SKILL)
    expect(page.locator("[data-action=try-version]")).to_have_count(0)
    response = page.goto(asgi_live_server.url + reverse("trials:try", args=[SKILL, DRAFT]))
    assert response.status == 403
    expect(page.locator("body")).not_to_contain_text("rr_sandbox")
    page.screenshot(path=str(SCREENSHOTS / "try-panel-other-team.png"), full_page=True)
