"""The top navigation as root (every link a platform admin has, in a tenant she administers): one row at
1,400 px; at 1,024 and 390 px the links wrap onto rows of the bar, which grows with them, none cut off, and
the page never scrolls sideways."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, browser, page, login_as

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LINKS = """() => Array.from(document.querySelectorAll(".topbar .nav a")).map((a) => {
  const box = a.getBoundingClientRect();
  return {text: a.textContent.trim(), top: Math.round(box.top), left: box.left, right: box.right};
})"""


@pytest.fixture
def root(asgi_live_server, settings):
    settings.AIRLOCK_VAR_DIR = settings.VAR_DIR
    call_command("seed_demo", verbosity=0)
    return get_user_model().objects.get(username="root")


def _open(page, server, width: int):
    page.set_viewport_size({"width": width, "height": 700})
    page.goto(f"{server.url}/approvals/")
    expect(page.locator("h1")).to_have_text("Approvals")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"navigation-{width}.png"))
    return page.evaluate(LINKS)


def test_roots_navigation_is_one_row_at_1400_px(asgi_live_server, root, login_as):
    links = _open(login_as(root), asgi_live_server, 1400)
    assert len(links) >= 10 and "Tenants" in {link["text"] for link in links}
    assert len({link["top"] for link in links}) == 1, links  # no second row spilling out of the bar
    assert max(link["right"] for link in links) <= 1400
    bar = login_as(root).locator(".topbar").bounding_box()
    assert bar["height"] <= 64


@pytest.mark.parametrize("width", [1024, 390])
def test_roots_navigation_is_whole_on_narrower_screens(asgi_live_server, root, login_as, width):
    page = login_as(root)
    links = _open(page, asgi_live_server, width)
    assert len(links) >= 10
    bar = page.locator(".topbar").bounding_box()
    for link in links:
        assert link["left"] >= 0 and link["right"] <= width, link  # every link whole on screen
        assert link["top"] >= 0 and link["top"] < bar["height"], link  # and inside the bar, which grows
    assert page.evaluate("document.documentElement.scrollWidth") <= width
