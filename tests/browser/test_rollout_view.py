"""The rollout view in headless Chromium on the demo's data: the owner (olivia) sees who is on which version of
customer.read_profile, with each version's calls, errors and latency, and rolls the canary back with a button;
a member of another team (adam, acme's admin) sees the stage without the canary's name and without buttons."""

from __future__ import annotations

import copy
import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from console.models import Agent
from registry.models import Rollout, Skill
from registry.rollouts import roll_out_version
from registry.services import create_draft_version
from registry.snapshots import latest_snapshot
from runs.models import Run
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as
from traces.recording import record_span

pytestmark = pytest.mark.browser
# docs/screenshots only when asked (AIRLOCK_UPDATE_SCREENSHOTS=1), so that a test run leaves the checkout clean
SCREENSHOTS = settings.BASE_DIR / (
    "docs/screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else "test-artifacts/screenshots"
)
SKILL = "customer.read_profile"


@pytest.fixture
def demo(asgi_live_server, settings):
    """The demo's data, then what an owner would do next: olivia publishes customer.read_profile 1.1.0 straight
    into a stage for globex, and both versions take calls (acme's on 1.0.0, globex's on 1.1.0)."""
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    users = {user.username: user for user in get_user_model().objects.all()}
    skill = Skill.objects.get(name=SKILL)
    manifest = copy.deepcopy(skill.versions.get().manifest)
    manifest["version"] = "1.1.0"
    manifest["description"] += " Also returns the account's region."
    manifest["output_schema"]["properties"]["region"] = {"type": "string", "description": "Data residency region."}
    draft = create_draft_version(manifest=manifest, author=users["olivia"], skill=skill)
    roll_out_version(version=draft, user=users["olivia"], tenants=["globex"], publish=True)
    snapshot = latest_snapshot()
    for agent_name, version, calls, failing in (
        ("support-bot", "1.0.0", 36, {7}),
        ("billing-bot", "1.1.0", 14, {4, 11}),
    ):
        agent = Agent.objects.get(name=agent_name)
        start = timezone.now() - timedelta(hours=3)
        run = Run.objects.create(tenant=agent.tenant, agent=agent, end_user="demo", task="lookups", snapshot=snapshot)
        for n in range(calls):
            began = start + timedelta(minutes=4 * n)
            took = (90 if version == "1.0.0" else 140) + (n * 37) % 120 + (600 if n in failing else 0)
            record_span(
                run=run,
                kind="tool_call",
                name=SKILL,
                started_at=began,
                ended_at=began + timedelta(milliseconds=took),
                skill_name=SKILL,
                skill_version=version,
                verdict="allow",
                outcome="failed" if n in failing else "succeeded",
                error_class="upstream" if n in failing else "",
            )
    return users


def _panel(page):
    return page.locator("#rollout")


def test_a_member_of_another_team_sees_the_stage_but_no_canary_and_no_button(asgi_live_server, page, login_as, demo):
    login_as(demo["adam"])
    page.goto(asgi_live_server.url + reverse("registry:skill", args=[SKILL]))
    panel = _panel(page)
    expect(panel).to_contain_text("1.1.0 is staged to canary tenants; everyone else is on 1.0.0.")
    expect(panel).to_contain_text("1 canary tenant")
    expect(panel).not_to_contain_text("globex")
    expect(panel.get_by_role("button")).to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(SCREENSHOTS / "rollout-other-team.png"))
    page.goto(asgi_live_server.url + reverse("registry:catalog"))
    expect(page.get_by_role("row", name=SKILL)).to_contain_text(
        "1.1.0 staged to 1 canary tenant · errors 14.3 % vs 2.8 %, p95 768 ms vs 202 ms"
    )


def test_the_owner_compares_the_versions_and_rolls_the_canary_back(asgi_live_server, page, login_as, demo):
    login_as(demo["olivia"])
    page.goto(asgi_live_server.url + reverse("registry:skill", args=[SKILL]))
    panel = _panel(page)
    expect(panel).to_contain_text("1.1.0 is staged to globex; everyone else is on 1.0.0.")
    canary = panel.get_by_role("row", name="1.1.0 staged")
    expect(canary).to_contain_text("canary tenants: globex")
    expect(canary).to_contain_text("14.3 % (2)")  # the demo's canary calls: 2 of 14 failed
    baseline = panel.get_by_role("row", name="1.0.0")
    expect(baseline).to_contain_text("everyone else")
    expect(baseline).to_contain_text("2.8 % (1)")
    expect(panel).to_contain_text("olivia")  # the rollout history names who rolled it out
    expect(panel).to_contain_text("rolled out 1.1.0 to globex")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    panel.screenshot(path=str(SCREENSHOTS / "rollout-owner.png"))

    page.once("dialog", lambda dialog: dialog.accept())
    canary.get_by_role("button", name="Roll back").click()
    expect(page.locator(".messages li", has_text="Rolled back")).to_contain_text(
        "Rolled back customer.read_profile@1.1.0: new runs get 1.0.0 again; running ones keep theirs."
    )
    expect(_panel(page)).to_contain_text("Everyone is on 1.0.0.")
    expect(_panel(page)).to_contain_text("rolled back 1.1.0 to 1.0.0")
    assert Rollout.objects.get().state == "rolled_back"
