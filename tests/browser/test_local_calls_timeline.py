"""Calls decided locally during an outage, in headless Chromium on the demo's own data (`seed_demo`): adam (an
admin of acme) finds the run through the "flagged local calls" filter, reads each call marked "decided locally ·
bundle N" in its real order, sees the one today's rules would only confirm, and opens the trace timeline.

With AIRLOCK_UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (linked from docs/operations.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from runs.demo import OUTAGE_TASK
from runs.models import LocalDecision, Run
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
    run = Run.objects.get(task=OUTAGE_TASK)
    bundle = LocalDecision.objects.filter(call__run=run).values_list("bundle_number", flat=True).first()
    return {"run": run, "bundle": bundle, "adam": get_user_model().objects.get(username="adam")}


def test_an_admin_finds_and_reads_the_calls_decided_during_an_outage(asgi_live_server, demo, login_as):
    page = login_as(demo["adam"])
    page.set_viewport_size({"width": 1280, "height": 820})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    run, bundle = demo["run"], demo["bundle"]

    page.goto(asgi_live_server.url + reverse("runs:run_list") + "?flagged=1")
    expect(page.locator(f"a[href='{reverse('runs:run_detail', args=[run.pk])}']")).to_have_count(1)
    expect(page.locator("tbody tr")).to_have_count(1)

    page.goto(asgi_live_server.url + reverse("runs:run_detail", args=[run.pk]))
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator(".local-call")).to_have_count(3)
    expect(page.locator(".local-call").first).to_contain_text(f"decided locally · bundle {bundle}")
    expect(rows.nth(0)).to_contain_text("support.read_case_notes")
    expect(rows.nth(2)).to_contain_text("drafts.save_case_note")
    expect(rows.nth(2)).to_contain_text("flagged: now confirm")
    expect(page.locator(".flag-reason")).to_have_count(1)
    page.screenshot(path=str(SCREENSHOTS / "run-local-calls.png"), full_page=True)

    page.goto(asgi_live_server.url + reverse("traces:for_run", args=[run.pk]))
    names = page.locator(".tl-row .nm")
    expect(names).to_have_count(3)
    expect(names.nth(0)).to_have_text(f"support.read_case_notes (decided locally under bundle {bundle})")
    expect(names.nth(2)).to_have_text(f"drafts.save_case_note (decided locally under bundle {bundle})")
    expect(page.locator(".tl-row").nth(2)).to_contain_text("flagged: now confirm")
    page.screenshot(path=str(SCREENSHOTS / "trace-local-calls.png"), full_page=True)
