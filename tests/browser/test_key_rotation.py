"""The agent key page in a real browser: a tenant admin rotates a key with a grace period, copies the new key
from the page that shows it once, sees both keys with their last use, and cuts the old one off."""

import httpx
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def _use(server, key: str) -> int:
    """What the agent's API answers this key, over real HTTP."""
    return httpx.get(server.url + reverse("agent-whoami"), headers={"Authorization": f"Bearer {key}"}).status_code


def test_an_admin_rotates_a_key_and_cuts_the_old_one_off(asgi_live_server, login_as, tenant_admin, agent_and_key):
    agent, old = agent_and_key
    assert _use(asgi_live_server, old) == 200
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("console:agent_list", args=["acme"]))
    page.get_by_role("link", name="Keys").click()
    expect(page.locator("h1")).to_have_text("Keys of support-bot")
    page.fill("#id_grace_hours", "800")
    page.get_by_role("button", name="Rotate and show the new key").click()  # the browser holds it back
    assert page.locator("#id_grace_hours").evaluate("field => field.validity.rangeOverflow")
    expect(page.locator("h1")).to_have_text("Keys of support-bot")

    page.fill("#id_grace_hours", "6")
    page.get_by_role("button", name="Rotate and show the new key").click()
    expect(page.locator("h1")).to_have_text("New key for support-bot")
    new = page.locator("#agent-key").inner_text().strip()
    assert new.startswith("ak_") and new != old
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "agent-key-rotated.png"))
    assert _use(asgi_live_server, new) == 200 and _use(asgi_live_server, old) == 200

    page.get_by_role("link", name="Back to the keys of support-bot").click()
    rows = page.locator("#agent-keys tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("current")
    expect(rows.nth(1)).to_contain_text("old, in grace")
    expect(rows.nth(1)).to_contain_text("now")  # its last use, a moment ago
    expect(rows.nth(1)).to_contain_text("(in 5\xa0hours, 59\xa0minutes)")
    expect(page.locator("body")).not_to_contain_text(new)
    page.screenshot(path=str(ARTIFACTS / "agent-keys.png"), full_page=True)
    page.get_by_role("link", name="Agents").click()
    expect(page.locator("tbody tr").first).to_contain_text("+ old key")
    page.screenshot(path=str(ARTIFACTS / "agents-with-old-key.png"))
    page.go_back()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cut off now").click()
    expect(page.locator(".messages")).to_contain_text("is cut off")
    expect(rows.nth(1)).to_contain_text("old, stopped")
    assert _use(asgi_live_server, old) == 401 and _use(asgi_live_server, new) == 200


def test_a_viewer_gets_the_403_page_not_the_keys(asgi_live_server, login_as, viewer, agent):
    page = login_as(viewer)
    response = page.goto(asgi_live_server.url + reverse("console:agent_keys", args=["acme", agent.pk]))
    assert response.status == 403
    expect(page.locator("h1")).to_have_text("This page needs the admin role in Acme Corp")
    expect(page.locator("body")).not_to_contain_text(agent.key_lookup)
