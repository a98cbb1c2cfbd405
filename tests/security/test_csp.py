"""Content-Security-Policy, checked as an attacker who got markup onto a page would hope it is not:
every console page (each named route, walked as test_web_hardening does) answers with the policy,
the policy allows no inline script, no inline style, no eval and no framing, and no page or
template carries inline script, a style= attribute, an on*= handler or a javascript: URL that the
policy would have to allow. tests/browser/test_csp_browser.py loads the pages in Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import get_resolver, reverse

from tests.security.test_isolation_generated import _walk
from tests.security.world import EXEMPT, FILLERS, build_world

HTML_SKIP = ("django-admin/", "api/", "v1/", "healthz")
ROUTES = [
    (route, name, params)
    for route, name, params in _walk(get_resolver())
    if name and not route.startswith(HTML_SKIP) and name not in EXEMPT
]
TEMPLATES = Path(settings.BASE_DIR) / "templates"


@pytest.fixture
def world(db):
    return build_world()


def _directives(header: str) -> dict[str, list[str]]:
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


class _InlineFinder(HTMLParser):
    """Collects what a strict policy blocks: inline <script>/<style>, style=, on*= and javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script" and not names.get("src") and names.get("type") not in ("application/json",):
            self.found.append("inline <script>")
        if tag == "style":
            self.found.append("<style> element")
        for name, value in attrs:
            if name == "style":
                self.found.append(f"style= on <{tag}>")
            elif name.startswith("on") or name.startswith("hx-on"):
                self.found.append(f"{name}= on <{tag}>")
            elif name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.found.append(f"javascript: URL in <{tag} {name}>")


def _inline_in(html: str) -> list[str]:
    finder = _InlineFinder()
    finder.feed(html)
    return finder.found


@pytest.mark.parametrize(("route", "name", "params"), ROUTES, ids=[r[1] for r in ROUTES])
def test_every_console_page_serves_the_policy(route, name, params, world):
    client = Client()
    client.force_login(world.acme_user)
    url = reverse(name, kwargs=FILLERS[params](world) if params else {})
    response = client.get(url)
    if response.status_code == 405:
        response = client.post(url, {})
    header = response.get("Content-Security-Policy")
    assert header, f"GET {url} ({response.status_code}) has no Content-Security-Policy"
    policy = _directives(header)
    assert policy["script-src"] == ["'self'"], f"{url}: {header}"
    assert policy["style-src"] == ["'self'"], f"{url}: {header}"
    assert policy["default-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"] and policy["base-uri"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["connect-src"] == ["'self'", "ws://testserver"]
    if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
        assert _inline_in(response.content.decode()) == [], f"{url} carries markup the policy blocks"


def test_over_https_only_the_secure_websocket_is_allowed(world):
    client = Client()
    client.force_login(world.acme_user)
    response = client.get(reverse("approvals:inbox"), secure=True)
    assert _directives(response["Content-Security-Policy"])["connect-src"] == ["'self'", "wss://testserver"]


def test_the_policy_holds_on_error_pages_in_production(world, settings):
    settings.DEBUG = False
    client = Client()
    client.force_login(world.acme_user)
    response = client.get("/registry/no.such_skill_anywhere/")
    assert response.status_code == 404
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_a_json_answer_needs_no_policy_because_it_is_never_a_page(world, settings):
    """An attacker who gets markup into a JSON answer (a reflected name, an error message) still cannot have
    it rendered: the answer is JSON and nosniff; a page of the console, even an error page, keeps its policy."""
    settings.DEBUG = False
    client = Client()
    client.force_login(world.acme_user)
    for url in ("/api/v1/skills/%3Cscript%3Ealert(1)%3C%2Fscript%3E", reverse("registry_api:skills")):
        response = client.get(url, HTTP_ACCEPT="application/json")
        assert response["Content-Type"].startswith("application/json"), url
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "Content-Security-Policy" not in response
        # Whatever renders HTML (the browsable API while DEBUG is on) keeps the policy.
        html = client.get(url, HTTP_ACCEPT="text/html")
        assert (
            html["Content-Type"].startswith("application/json")
            or "script-src 'self'" in html["Content-Security-Policy"]
        )
    page = client.get(reverse("registry:catalog"))
    assert "script-src 'self'" in page["Content-Security-Policy"]


def test_only_the_api_reference_page_is_widened(world):
    """Redoc (drf-spectacular) needs inline styles; it shows only the public schema and loads nothing from elsewhere."""
    response = Client().get(reverse("api-docs"))
    policy = _directives(response["Content-Security-Policy"])
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    assert policy["frame-ancestors"] == ["'none'"]


@pytest.mark.parametrize("template", sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.html")))
def test_no_template_needs_an_unsafe_policy(template):
    text = (TEMPLATES / template).read_text()
    text = re.sub(r"\{#.*?#\}", "", text)  # comments may name what they avoid
    problems = _inline_in(re.sub(r"\{[{%].*?[%}]\}", "x", text))
    assert problems == [], f"templates/{template}: {problems}"


def test_htmx_injects_no_style_and_evaluates_nothing(world):
    client = Client()
    client.force_login(world.acme_user)
    html = client.get(reverse("console:home")).content.decode()
    config = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
    assert config is not None
    assert '"includeIndicatorStyles": false' in config.group(1) and '"allowEval": false' in config.group(1)
