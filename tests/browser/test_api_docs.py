"""/api/docs/ without internet: Redoc from the vendored, pinned sidecar package, no web fonts, nothing from
another origin; in Chromium it renders the API's title (issue 44)."""

import re

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser.conftest import *  # noqa: F403

pytestmark = pytest.mark.django_db
REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def test_the_page_and_its_policy_name_no_other_origin():
    response = Client().get(reverse("api-docs"))
    assert response.status_code == 200
    html = response.content.decode()
    assert re.findall(r"(?:https?:)?//[\w.-]+", html) == [], html
    assert "/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js" in html
    policy = response["Content-Security-Policy"]
    assert not re.search(r"https?://", policy.replace("ws://testserver", "")), policy


@pytest.mark.browser
def test_redoc_renders_the_api_title_with_every_other_origin_unreachable(asgi_live_server, page):
    elsewhere: list[str] = []
    violations: list[str] = []

    def only_this_origin(route):
        if route.request.url.startswith(asgi_live_server.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_origin)
    page.on("console", lambda message: violations.append(message.text) if "Content Security" in message.text else None)
    page.goto(asgi_live_server.url + reverse("api-docs"))
    expect(page.locator("h1")).to_contain_text(settings.SPECTACULAR_SETTINGS["TITLE"])
    expect(page.get_by_text("Control plane for AI agents' tool calls").first).to_be_visible()
    # Redoc's footer shows Redocly's logo from their CDN; the policy blocks it before any request leaves, and
    # Redoc drops an image that fails to load.
    assert elsewhere == [] and [v for v in violations if REDOCLY_LOGO not in v] == []
