"""The live inbox in headless Chromium: an agent's call hits confirm over HTTP, the card appears in
two approvers' open inboxes without a reload, one approves with a click, the agent's long poll
returns the executed result, and the other approver's inbox loses the card.

`test_live_inbox` uses the in-memory channel layer and eager Celery in the server;
`test_live_inbox_with_redis_and_worker` uses the Redis channel layer and a real Celery
worker subprocess on PostgreSQL, and saves docs/inbox.png.
"""

import os
import re
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.urls import reverse
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from console.celery import app as celery_app
from tests.approvals.gate_world import build_refund_world
from tests.browser.conftest import *  # noqa: F403 - asgi_live_server, page, login_as (browser: below)
from tests.celery_worker import start_worker, stop_worker, worker_env

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    """Module-scoped here: Playwright's sync API keeps an event loop running in this thread while it
    is started, which makes Django refuse database work in every later test of the session."""
    import shutil

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        if os.environ.get("AIRLOCK_REQUIRE_SERVICES") == "1":
            pytest.fail(f"needs Chromium at {CHROMIUM}", pytrace=False)
        pytest.skip(f"needs Chromium at {CHROMIUM} (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield chromium
    chromium.close()
    playwright.stop()


ROOT = Path(__file__).resolve().parent.parent.parent
# The README's screenshot is refreshed on request (AIRLOCK_UPDATE_SCREENSHOTS=1), so that an ordinary
# test run never changes a tracked file.
SCREENSHOT_DIR = ROOT / "docs" if os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1" else ROOT / "test-artifacts"


def _agent(server_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=server_url, headers={"Authorization": f"Bearer {key}"}, timeout=40)


def _long_poll_until_completed(agent: httpx.Client, run_id: str, after: int, found: dict) -> None:
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        body = agent.get(reverse("runs_api:run_events", args=[run_id]), params={"after": after, "wait": 30}).json()
        for event in body["events"]:
            if event["kind"] == "call.completed":
                found.update(event=event, at=time.monotonic())
                return
        after = body["next_cursor"]


def _second_page(browser, server_url: str, user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(15_000)
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": server_url}])
    return context, context.new_page()


def _flow(
    asgi_live_server,
    page,
    browser,
    login_as,
    acme,
    approver,
    second_approver,
    agent_and_key,
    screenshot: Path | None,
    keyboard: bool = False,
) -> None:
    build_refund_world(acme)
    inbox_url = asgi_live_server.url + reverse("approvals:inbox")
    login_as(approver)
    page.goto(inbox_url)
    expect(page.locator("#live-status")).to_have_text("live")
    other_context, other = _second_page(browser, asgi_live_server.url, second_approver)
    try:
        other.goto(inbox_url)
        expect(other.locator("#live-status")).to_have_text("live")
        agent = _agent(asgi_live_server.url, agent_and_key[1])
        run = agent.post(
            reverse("runs_api:run_create"),
            json={"end_user": "customer-7", "task": "refund order 1042", "end_user_roles": ["customer"]},
        ).json()
        calls = [
            {
                "call_id": "c1",
                "name": "billing.create_refund",
                "arguments": {"customer_id": "c-42", "amount_cents": 1250, "card_token": "tok_live_x"},
            },
            {
                "call_id": "c2",
                "name": "billing.create_refund",
                "arguments": {"customer_id": "c-77", "amount_cents": 99000},
            },
        ]
        results = agent.post(reverse("runs_api:run_calls", args=[run["run_id"]]), json={"calls": calls}).json()
        approval_ids = [r["approval_id"] for r in results["results"]]
        assert [r["status"] for r in results["results"]] == ["approval_required"] * 2
        target = approval_ids[0]
        for p in (page, other):  # no reload: the websocket hint made the page fetch the cards
            expect(p.locator(f"#approval-{target}")).to_be_visible()
            expect(p.locator(f"#approval-{approval_ids[1]}")).to_be_visible()
        expect(page.locator("#pending-count")).to_have_text("2")
        assert "tok_live_x" not in page.content()
        if screenshot is not None:
            page.locator(f"#approval-{target}").click(position={"x": 5, "y": 5})
            page.keyboard.press("j")  # select the first card with the keyboard
            page.screenshot(path=str(screenshot), full_page=False)

        cursor = agent.get(reverse("runs_api:run_events", args=[run["run_id"]])).json()["next_cursor"]
        found: dict = {}
        poller = threading.Thread(target=_long_poll_until_completed, args=(agent, run["run_id"], cursor, found))
        poller.start()
        time.sleep(0.2)  # the agent is waiting in its long poll (of up to 30 s)
        clicked = time.monotonic()
        if keyboard:  # newest first: the target is the second card; j, j selects it, a approves it
            page.locator("h1").click()
            page.keyboard.press("j")
            page.keyboard.press("j")
            expect(page.locator(f"#approval-{target}")).to_have_class(re.compile("selected"))
            page.keyboard.press("a")
        else:
            page.locator(f"#approval-{target} button[data-action=approve]").click()
        expect(page.locator(f"#approval-{target}")).to_contain_text("approved by approver")
        poller.join(45)
        assert found, "the long poll never returned the executed result"
        result = found["event"]["payload"]["result"]
        assert result["status"] == "ok" and result["content"]["amount_cents"] == 1250
        expect(other.locator(f"#approval-{target}")).to_have_count(0)  # gone from the other inbox
        expect(other.locator(f"#approval-{approval_ids[1]}")).to_be_visible()
        expect(other.locator("#pending-count")).to_have_text("1")
        assert ApprovalRequest.objects.get(pk=target).status == "executed"
        print(f"click → executed result by long poll: {(found['at'] - clicked) * 1000:.0f} ms")
    finally:
        other_context.close()


@pytest.mark.postgres  # SQLite's shared in-memory test database locks whole tables under concurrent requests
def test_live_inbox(
    asgi_live_server, page, browser, login_as, acme, approver, second_approver, agent_and_key, settings
):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    _flow(
        asgi_live_server, page, browser, login_as, acme, approver, second_approver, agent_and_key, None, keyboard=True
    )


@pytest.mark.postgres
@pytest.mark.redis
def test_live_inbox_with_redis_and_worker(
    asgi_live_server, page, browser, login_as, acme, approver, second_approver, agent_and_key, tmp_path, monkeypatch
):
    from channels.layers import channel_layers

    channel_layers.backends.clear()  # settings.CHANNEL_LAYERS is channels_redis (REDIS_URL is set)
    assert "Redis" in settings.CHANNEL_LAYERS["default"]["BACKEND"]
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    log = tmp_path / "worker.log"
    env = worker_env(AIRLOCK_TEST_LEDGER=str(ledger))
    worker = start_worker("browser", log, env, "--pool=solo", "-I", "tests.approvals.worker_tools")
    celery_app.conf.task_always_eager = False
    try:
        _flow(
            asgi_live_server,
            page,
            browser,
            login_as,
            acme,
            approver,
            second_approver,
            agent_and_key,
            SCREENSHOT_DIR / "inbox.png",
        )
        assert "approvals.tasks.resume_call" in log.read_text()  # the worker, not the server, resumed it
    finally:
        celery_app.conf.task_always_eager = True
        stop_worker(worker)
