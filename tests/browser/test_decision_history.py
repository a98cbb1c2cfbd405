"""The decision history in a real browser: an auditor finds it in the navigation, filters it, follows a
decision to its request and downloads the CSV; a viewer has no link to it and is refused at its URL."""

import csv
import io
import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from approvals.services import decide_approval
from tests.approvals.factories import open_request

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("AIRLOCK_SHOTS", Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"))


@pytest.fixture
def decisions(acme, agent, approver, second_approver):
    approved = open_request(tenant=acme, agent=agent)
    decide_approval(approval=approved, user=approver, decision="approve")
    declined = open_request(tenant=acme, agent=agent)
    decide_approval(approval=declined, user=second_approver, decision="decline", reason="=cmd|'/c calc'!A1")
    return approved, declined


def test_an_auditor_filters_follows_and_exports_the_history(asgi_live_server, login_as, auditor, acme, decisions):
    approved, declined = decisions
    page = login_as(auditor)
    page.goto(asgi_live_server.url + reverse("traces:list"))
    page.get_by_role("link", name="Decisions").click()
    expect(page.locator("h1")).to_have_text("Decision history")
    rows = page.locator("#decisions tbody tr")
    expect(rows).to_have_count(2)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "decision-history-auditor.png"), full_page=True)

    page.get_by_label("Outcome").select_option("declined")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("approver2")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export CSV").click()
    text = Path(download_info.value.path()).read_text()
    exported = list(csv.DictReader(io.StringIO(text)))
    assert [row["outcome"] for row in exported] == ["declined"]  # the export keeps the page's filters
    assert exported[0]["reason"] == "'=cmd|'/c calc'!A1"

    rows.first.get_by_role("link", name=f"#{declined.pk}").click()
    expect(page).to_have_url(asgi_live_server.url + reverse("approvals:detail", args=[declined.pk]))
    expect(page.locator("form[action$='/decide/']")).to_have_count(0)  # read-only for the auditor


def test_a_viewer_has_no_link_and_is_refused(asgi_live_server, login_as, viewer, acme, decisions):
    page = login_as(viewer)
    page.goto(asgi_live_server.url + reverse("traces:list"))
    expect(page.get_by_role("link", name="Decisions")).to_have_count(0)
    response = page.goto(asgi_live_server.url + reverse("approvals:decision_history", args=["acme"]))
    assert response.status == 403
    expect(page.locator("body")).to_contain_text("admin or auditor")
    expect(page.locator("#decisions")).to_have_count(0)
