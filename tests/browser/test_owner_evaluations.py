"""Issue 38 part 5 in headless Chromium, on the demo's own data: olivia (support-tools) opens her team's
labelled set, reads recall@1/@5, MRR and leaks, runs it again, and labels a zero-result search in one click;
a member of another team finds neither the set nor its searches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from console.models import Team
from registry.models import EvaluationSet
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
    users = {u.username: u for u in get_user_model().objects.all()}
    rival = get_user_model().objects.create_user("rita", password="pw")  # only in developer-platform
    Team.objects.get(slug="developer-platform").members.add(rival)
    users["rita"] = rival
    return users


def test_the_owner_reads_runs_and_labels_a_search(asgi_live_server, page, login_as, demo):
    evaluation_set = EvaluationSet.objects.get(namespace="support", name="user-intents")
    login_as(demo["olivia"])
    page.goto(asgi_live_server.url + reverse("registry:evaluations"))
    expect(page.get_by_test_id("evaluation-sets")).to_contain_text("user-intents")
    page.get_by_role("link", name="user-intents").click()
    figures = page.get_by_test_id("latest-figures")
    expect(figures).to_contain_text("Recall@1")
    expect(figures).to_contain_text("MRR")
    expect(page.get_by_test_id("evaluation-history").locator("tbody tr")).to_have_count(1)
    page.get_by_role("button", name="Run evaluation").click()
    expect(page.get_by_test_id("evaluation-history").locator("tbody tr")).to_have_count(2)
    searches = page.get_by_test_id("zero-result-searches")
    expect(searches).to_contain_text("put the case on hold until the customer answers")
    expect(searches).not_to_contain_text("Acme")
    searches.locator("select").first.select_option("support.update_ticket_status")
    searches.get_by_role("button", name="Add as intent").first.click()
    expect(page.get_by_test_id("labelled-intents")).to_contain_text("from a search")
    assert evaluation_set.intents.filter(source="search").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "owner-evaluation.png"), full_page=True)


def test_a_member_of_another_team_finds_nothing(asgi_live_server, page, login_as, demo):
    evaluation_set = EvaluationSet.objects.get(namespace="support", name="user-intents")
    login_as(demo["rita"])
    page.goto(asgi_live_server.url + reverse("registry:evaluations"))
    expect(page.get_by_test_id("evaluation-sets")).not_to_contain_text("user-intents")
    expect(page.locator("#id_namespace option[value=support]")).to_have_count(0)
    page.screenshot(path=str(SCREENSHOTS / "owner-evaluation-other-team.png"), full_page=True)
    response = page.goto(asgi_live_server.url + reverse("registry:evaluation", args=[evaluation_set.pk]))
    assert response.status == 404
