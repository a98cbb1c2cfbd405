"""Browser-test fixtures: a live ASGI server on the test database and a headless Chromium page.

Use them in any `tests/**/test_*.py` under `tests/browser/` (or import them from a conftest
with `from tests.browser.conftest import *`). Mark each test `@pytest.mark.browser`; the
`asgi_live_server` fixture already turns on `transaction=True` database access, which the
server thread needs to see your rows.

    @pytest.mark.browser
    def test_inbox(asgi_live_server, page, login_as, approver):
        login_as(approver)
        page.goto(asgi_live_server.url + reverse("approvals:inbox"))
        expect(page.locator("h1")).to_have_text("Approvals")

Fixtures:
- `asgi_live_server`: uvicorn serving the full ASGI app (HTTP and websockets, the same
  ProtocolTypeRouter as production) in a thread of the test process, on a free port.
  `.url` is "http://127.0.0.1:<port>", `.ws_url` is "ws://127.0.0.1:<port>". Because it is a
  thread and not a process, it sees the test database on SQLite (the shared in-memory test
  database) and on PostgreSQL alike, and it shares the in-memory channel layer's process.
  Rows you create before the request must be committed: the fixture requests
  `transactional_db`, so just create them as usual.
- `browser`: a headless Debian Chromium (/usr/bin/chromium) via Playwright, started for each
  test and stopped after it (a live sync Playwright breaks the ORM in later tests). Skipped
  with a clear reason when Chromium is missing, unless AIRLOCK_REQUIRE_SERVICES=1.
- `page`: a fresh browser context and page per test (1280x800); on failure a full-page
  screenshot is saved under test-artifacts/browser/<test name>.png.
- `login_as(user, tenant=None)`: logs `user` in by planting a session cookie (no form), and
  optionally picks the tenant in the tenant switcher; returns the page.

Django's ORM refuses to run inside a running event loop, and Playwright's sync API keeps
one in the test's thread, so these fixtures set DJANGO_ALLOW_ASYNC_UNSAFE for browser tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("AIRLOCK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts" / "browser"


@dataclass
class LiveServer:
    url: str
    ws_url: str
    host: str
    port: int


def _build_application():
    """A fresh ASGI app, so middleware reads the settings of this test (airlock.asgi is built at import)."""
    from channels.routing import ProtocolTypeRouter
    from django.core.handlers.asgi import ASGIHandler

    from airlock.asgi import application

    return ProtocolTypeRouter({"http": ASGIHandler(), "websocket": application.application_mapping["websocket"]})


@pytest.fixture
def asgi_live_server(transactional_db, settings, monkeypatch) -> Iterator[LiveServer]:
    import uvicorn

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    settings.WHITENOISE_USE_FINDERS = True  # serve static/ without collectstatic
    settings.WHITENOISE_AUTOREFRESH = True
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_build_application(), lifespan="off", log_level="warning", ws="websockets")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="asgi-live-server")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("The ASGI live server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(url=f"http://127.0.0.1:{port}", ws_url=f"ws://127.0.0.1:{port}", host="127.0.0.1", port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        _drop_connections_kept_by_stopped_requests()


def _drop_connections_kept_by_stopped_requests() -> None:
    """A request still running when the server stops (a long poll, the inbox's socket) ends with its thread,
    and the pooled connection it held is never given back: psycopg's pool counts it as in use for good, and
    after a few dozen browser tests in one process no request gets a connection (PoolTimeout). When more
    than this test's own connection is out, the next test gets a fresh pool; the old pool closes each
    connection handed back to it (Django returns a connection to the pool it came from)."""
    from django.db import connections

    database = connections["default"]
    pool = getattr(database, "pool", None)  # PostgreSQL with a pool only
    if pool is None:
        return
    stats = pool.get_stats()
    if stats.get("pool_size", 0) - stats.get("pool_available", 0) > 1:
        database.close_pool()


@pytest.fixture
def browser(monkeypatch):
    """Playwright and Chromium for one test, stopped after it.

    Playwright's sync API leaves its event loop marked as running in this thread while it is
    alive, which breaks the ORM and asyncio.run() in every later test; so it never outlives
    the test (about half a second to start).
    """
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        message = f"needs Chromium at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("AIRLOCK_REQUIRE_SERVICES") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser, request, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report


@pytest.fixture
def login_as(asgi_live_server, page) -> Callable:
    from django.conf import settings as django_settings
    from django.test import Client

    def login(user, tenant=None):
        client = Client()
        client.force_login(user)
        if tenant is not None:
            from console.tenancy import SESSION_TENANT_KEY

            session = client.session
            session[SESSION_TENANT_KEY] = tenant.slug
            session.save()
        cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
        page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": asgi_live_server.url}])
        return page

    return login
