"""The incident controls in a real browser: an approver stops a run from its page and the agent is refused
over real HTTP; a viewer gets no Stop button and cannot post one; an admin suspends an agent and freezes
the tenant; the freeze banner shows on every page of the tenant's members and on none of another tenant's."""

import os

import httpx
import pytest
from django.conf import settings
from django.urls import reverse
from playwright.sync_api import expect

from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.browser
# docs/screenshots only when asked (AIRLOCK_UPDATE_SCREENSHOTS=1), so that a test run leaves the checkout clean
SCREENSHOTS = settings.BASE_DIR / (
    "docs/screenshots" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else "test-artifacts/screenshots"
)


@pytest.fixture
def live_run(asgi_live_server, acme, agent_and_key) -> tuple[str, dict]:
    """A run started by the agent over HTTP; returns its id and the agent's headers."""
    make_skill("orders.lookup", adapter="python:demo.lookup_order")
    grant(acme, "orders.*")
    headers = {"Authorization": f"Bearer {agent_and_key[1]}"}
    response = httpx.post(
        asgi_live_server.url + reverse("runs_api:run_create"),
        json={"end_user": "u-1", "task": "refunds"},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return response.json()["run_id"], headers


def _call(server, run_id: str, headers: dict) -> httpx.Response:
    body = {"calls": [{"call_id": "next", "name": "orders.lookup", "arguments": {"order_id": "ord_1"}}]}
    return httpx.post(server.url + reverse("runs_api:run_calls", args=[run_id]), json=body, headers=headers)


def test_an_approver_stops_a_run_from_its_page(asgi_live_server, login_as, approver, live_run):
    run_id, headers = live_run
    page = login_as(approver)
    page.goto(asgi_live_server.url + reverse("runs:run_detail", args=[run_id]))
    page.fill("#stop-run #id_reason", "refunding the same order in a loop")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop run").click()
    expect(page.locator(".messages")).to_contain_text("Run stopped")
    expect(page.locator("#run-stopped")).to_contain_text("by approver")
    expect(page.locator("#run-stopped")).to_contain_text("refunding the same order in a loop")
    expect(page.locator("#stop-run")).to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "run-stopped.png"))

    refused = _call(asgi_live_server, run_id, headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_stopped"
    assert "approver stopped this run" in refused.json()["error"]["message"]


def test_a_viewer_sees_no_stop_button_and_cannot_post_one(asgi_live_server, login_as, viewer, live_run):
    run_id, headers = live_run
    page = login_as(viewer)
    page.goto(asgi_live_server.url + reverse("runs:run_detail", args=[run_id]))
    expect(page.locator("h1")).to_contain_text("Run")
    expect(page.locator("#stop-run")).to_have_count(0)
    status = page.evaluate(
        """async (url) => {
            const token = document.querySelector('meta[name="csrf-token"]').content;
            const body = new URLSearchParams({reason: "forged", csrfmiddlewaretoken: token});
            return (await fetch(url, {method: "POST", body})).status;
        }""",
        reverse("runs:run_stop", args=[run_id]),
    )
    assert status == 403
    assert _call(asgi_live_server, run_id, headers).status_code == 200  # the run goes on


def test_an_admin_suspends_an_agent_and_its_key_gets_403(asgi_live_server, login_as, tenant_admin, live_run, agent):
    _, headers = live_run
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("console:agent_keys", args=["acme", agent.pk]))
    page.fill("#suspension #id_reason", "hammering the refunds API")
    page.fill("#suspension #id_minutes", "60")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Suspend").click()
    expect(page.locator("#suspension .callout")).to_contain_text("admin suspended agent support-bot until")
    page.screenshot(path=str(SCREENSHOTS / "agent-suspended.png"))
    started = httpx.post(
        asgi_live_server.url + reverse("runs_api:run_create"), json={"end_user": "u-1"}, headers=headers
    )
    assert started.status_code == 403 and started.json()["error"]["code"] == "agent_suspended"
    page.get_by_role("button", name="Resume support-bot").click()
    expect(page.locator("#suspension form button")).to_have_text("Suspend")


def test_the_freeze_banner_shows_to_the_tenants_members_and_not_to_another_tenant(
    asgi_live_server, login_as, tenant_admin, viewer, outsider, live_run
):
    run_id, headers = live_run
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("console:tenant_controls", args=["acme"]))
    page.fill("#freeze #id_reason", "incident 42: duplicate refunds")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Freeze writes").click()
    expect(page.locator("#frozen-banner")).to_contain_text("Acme Corp is frozen")
    expect(page.locator("#frozen-banner")).to_contain_text("incident 42: duplicate refunds")
    expect(page.locator("#operator-actions")).to_contain_text("Tenant frozen")
    page.screenshot(path=str(SCREENSHOTS / "tenant-frozen.png"), full_page=True)
    assert _call(asgi_live_server, run_id, headers).json()["results"][0]["status"] == "ok"  # a read

    viewer_page = login_as(viewer)
    for url in (reverse("runs:run_list"), reverse("approvals:inbox"), reverse("runs:run_detail", args=[run_id])):
        viewer_page.goto(asgi_live_server.url + url)
        expect(viewer_page.locator("#frozen-banner")).to_contain_text("Only reads run")

    outsider_page = login_as(outsider)
    outsider_page.goto(asgi_live_server.url + reverse("runs:run_list"))
    expect(outsider_page.locator("#frozen-banner")).to_have_count(0)
    response = outsider_page.goto(asgi_live_server.url + reverse("console:tenant_controls", args=["acme"]))
    assert response.status == 404
