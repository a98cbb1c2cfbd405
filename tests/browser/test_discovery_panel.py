"""Issue 19 in headless Chromium, on the demo's own data: an owner (olivia) opens a skill she owns and sees
the namespace's discovery figures from a real harness run and her tenants' missed searches as candidate
examples; the catalog shows the figures of every namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from bench import discovery as harness
from console.models import Agent
from registry.models import DiscoveryQuery
from registry.services import record_discovery_evaluation
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the harness searches through the test client
    report = harness.evaluate(scale_versions=0, generated_skills=120)  # flushes: run it before seeding
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    for catalog, rows in report.namespaces.items():
        record_discovery_evaluation(
            catalog=catalog,
            database=report.vendor,
            namespaces={namespace: scores.as_dict() for namespace, scores in rows.items()},
        )
    bot = Agent.objects.get(name="support-bot")
    DiscoveryQuery.objects.create(query="customer was charged twice", namespace="billing", result_count=0, agent=bot)
    return {u.username: u for u in get_user_model().objects.all()}


def test_an_owner_reads_the_namespace_figures_and_candidate_examples(asgi_live_server, page, login_as, demo):
    login_as(demo["olivia"])
    page.goto(asgi_live_server.url + reverse("registry:skill", args=["billing.create_refund_request"]))
    panel = page.locator(".panel", has=page.get_by_role("heading", name="Discovery quality in billing"))
    expect(panel).to_be_visible()
    expect(panel.get_by_role("table", name="Discovery quality by namespace")).to_contain_text("demo")
    misses = page.locator(".panel", has=page.get_by_role("heading", name="Discovery misses in billing"))
    expect(misses.get_by_text("Candidate examples")).to_be_visible()
    expect(misses.locator("pre")).to_contain_text("customer was charged twice")
    box, pre = misses.bounding_box(), misses.locator("pre").bounding_box()
    assert pre["x"] + pre["width"] <= box["x"] + box["width"] + 1  # the snippet stays inside its panel
    page.screenshot(path=str(ARTIFACTS / "discovery-skill-panel.png"), full_page=True)

    page.goto(asgi_live_server.url + reverse("registry:catalog"))
    figures = page.get_by_role("table", name="Discovery quality by namespace")
    expect(figures).to_contain_text("billing")
    expect(figures).to_contain_text("generated")
    page.screenshot(path=str(ARTIFACTS / "discovery-catalog-panel.png"), full_page=True)
