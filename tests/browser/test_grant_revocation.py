"""Issue 45 in headless Chromium, on the demo's own data (`seed_demo`): an admin opens a grant, sees which recent
runs and agents its revocation would have refused, revokes it with a reason and reads it in the grant's change
log, as loaded and after a reload; the Runs list pages past 50; and the demo's audit record verifies."""

import importlib.util
import os
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from audit import chain
from console.models import Agent, Membership, Role
from lib import signing
from policies.models import Grant, GrantEvent
from runs.grant_revocation import revocation_preview
from runs.models import Run
from tests.runs.factories import run_for

pytestmark = pytest.mark.browser
_spec = importlib.util.spec_from_file_location(
    "verify_audit_export", django_settings.BASE_DIR / "docs/verify_audit_export.py"
)
standalone = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standalone)
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = (
    ROOT / "docs" / "screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
)


@pytest.fixture
def demo(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    admin = Membership.objects.filter(tenant__slug="acme", role=Role.ADMIN).select_related("user").first().user
    return admin


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_the_demo_audit_record_verifies(demo):
    chain.write_checkpoints()
    out = StringIO()
    call_command("verify_audit", stdout=out)
    assert "FAIL" not in out.getvalue() and "chains verify" in out.getvalue()


def test_an_admin_previews_revokes_with_a_reason_and_reads_the_log(demo, asgi_live_server, login_as):
    active = Grant.objects.active().filter(tenant__slug="acme")
    target = next((grant for grant in active if revocation_preview(grant).runs), None)
    assert target is not None, "the demo records calls that some grant alone lets through"
    preview = revocation_preview(target)
    page = login_as(demo)
    page.goto(asgi_live_server.url + reverse("policies:grant_list", args=["acme"]))
    page.locator(f"a[href='{reverse('grants:grant_detail', args=['acme', target.pk])}#revocation']").click()
    for _ in ("as loaded", "after a reload"):
        shown = page.locator("#revocation-preview")
        expect(shown).to_contain_text(f"would have refused {preview.calls} call")
        expect(shown).to_contain_text(preview.agents[0])
        expect(page.locator("#revocation .preview-list li")).to_have_count(min(len(preview.runs), 20))
        expect(page.locator("#grant-log tbody tr")).to_have_count(1)  # granted, by the demo's seeding
        page.reload()
    _shot(page, "grant-revocation-preview.png")

    page.fill("#id_reason", "The refund bot moves to its own role")
    page.get_by_role("button", name="Revoke grant").click()
    for _ in ("as loaded", "after a reload"):
        log = page.locator("#grant-log tbody tr")
        expect(log).to_have_count(2)
        expect(log.first).to_contain_text("Revoked")
        expect(log.first).to_contain_text("The refund bot moves to its own role")
        expect(log.first).to_contain_text(demo.username)
        expect(page.locator("#revocation")).to_have_count(0)
        page.reload()
    _shot(page, "grant-change-log.png")
    assert GrantEvent.objects.filter(grant_ref=target.pk, action="revoked").count() == 1

    # The auditor's copy: the decision history's audit export carries the log and checks without Airlock.
    chain.write_checkpoints()
    page.goto(asgi_live_server.url + reverse("approvals:decision_history", args=["acme"]))
    _shot(page, "decision-history-exports.png")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export audit record").click()
    lines = Path(download_info.value.path()).read_text().splitlines()
    assert any("The refund bot moves to its own role" in line for line in lines)
    assert standalone.check(lines, signing.public_key_pem()) == []


def test_the_runs_list_pages_past_50(demo, asgi_live_server, login_as):
    agent = Agent.objects.filter(tenant__slug="acme").first()
    for n in range(60):
        run_for(agent, task=f"paged run {n}")
    total = Run.objects.filter(tenant__slug="acme").count()
    page = login_as(demo)
    page.goto(asgi_live_server.url + reverse("runs:run_list") + "?tenant=acme")
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(50)
    page.get_by_role("link", name="Older runs").click()
    for _ in ("as loaded", "after a reload"):
        expect(rows).to_have_count(min(total - 50, 50))
        expect(page.get_by_role("link", name="Newest runs")).to_be_visible()
        page.reload()
    _shot(page, "runs-older-page.png")
    page.get_by_role("link", name="Newest runs").click()
    expect(rows).to_have_count(50)
