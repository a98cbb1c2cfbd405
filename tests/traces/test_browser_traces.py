"""The trace console in headless Chromium: the waterfall, the span side panel, the why panel, the
next page of a large trace loaded on scroll, and the skill page. Screenshots land in
test-artifacts/traces/ for a human look."""

import os
import shutil
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from runs import demo
from runs.models import ToolCall
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, asgi_live_server  # noqa: F401
from tests.traces.conftest import make_run
from traces.models import Span, Trace
from traces.recording import ensure_trace, record_span

pytestmark = pytest.mark.browser
SHOTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts" / "traces"


def in_browser(live, user, script: Callable) -> None:
    """Run `script(page)` with a logged-in page in a thread of its own. Playwright's sync API keeps an
    event loop in the thread that starts it; another browser test module may already hold one in the
    main thread, and Django refuses database work in a thread with a running loop."""
    from django.conf import settings as django_settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        if os.environ.get("AIRLOCK_REQUIRE_SERVICES") == "1":
            pytest.fail(f"needs Chromium at {CHROMIUM}", pytrace=False)
        pytest.skip(f"needs Chromium at {CHROMIUM} (apt-get install -y chromium)")
    failure: list[BaseException] = []

    def run() -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as playwright:
                chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                context = chromium.new_context(viewport={"width": 1280, "height": 800})
                context.set_default_timeout(10_000)
                context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live.url}])
                page = context.new_page()
                try:
                    script(page)
                except BaseException:
                    _shot(page, "failure")
                    raise
                finally:
                    chromium.close()
        except BaseException as exc:  # handed to the test thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="traces-browser")
    thread.start()
    thread.join(timeout=120)
    if failure:
        raise failure[0]


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_waterfall_side_panel_and_why(asgi_live_server, viewer, agent, snapshot, owned_skill):  # noqa: F811
    demo.seed(SimpleNamespace(agents={"acme/support-bot": agent}, lines=[]))
    trace = Trace.objects.get(name=demo.DEMO_TASK)
    call = ToolCall.objects.create(
        run=trace.run,
        call_id="call_9",
        name="orders.lookup",
        status="succeeded",
        verdict="allow",
        attempts=1,
        result_sha256="c" * 64,
        result_bytes=812,
        decision={
            "rule_id": "tenant/allow-reads",
            "policy_version": "acme@v3",
            "reason": "reads are fine",
            "shadow": [
                {"policy_version": "acme@v4", "verdict": "confirm", "rule_id": "tenant/ask-first", "differs": True}
            ],
        },
    )
    record_span(
        run=trace.run,
        kind="tool_call",
        name="orders.lookup",
        call=call,
        verdict="allow",
        started_at=trace.started_at + timedelta(milliseconds=9100),
        ended_at=trace.started_at + timedelta(milliseconds=9300),
        outcome="succeeded",
    )
    url = asgi_live_server.url + reverse("traces:detail", args=[trace.pk])

    def script(page):
        page.goto(url)
        expect(page.locator(".tl-row")).to_have_count(11)
        expect(page.locator(".tl-row.err")).to_have_count(2)
        _shot(page, "timeline")
        page.locator(".tl-row", has_text="orders.lookup").last.click()
        expect(page.locator("#side")).to_contain_text("gen_ai.security.decision.type")
        page.locator("#side button", has_text="Why?").click()
        expect(page.locator(".why")).to_contain_text("tenant/ask-first")
        expect(page.locator(".why")).to_contain_text("812 bytes")
        _shot(page, "timeline_why")

    in_browser(asgi_live_server, viewer, script)


def test_large_trace_loads_the_next_page_on_scroll(asgi_live_server, viewer, run):  # noqa: F811
    trace = ensure_trace(run)
    start = timezone.now()
    Span.objects.bulk_create(
        [
            Span(
                trace=trace,
                span_id=f"{i + 1:016x}",
                kind="tool_call",
                name=f"call {i}",
                started_at=start + timedelta(milliseconds=i),
                ended_at=start + timedelta(milliseconds=i + 3),
            )
            for i in range(700)
        ]
    )
    url = asgi_live_server.url + reverse("traces:detail", args=[trace.pk])

    def script(page):
        page.goto(url)
        for shown in (200, 400, 600):
            expect(page.locator(".tl-row")).to_have_count(shown)
            page.locator(".tl-more").scroll_into_view_if_needed()
        expect(page.locator(".tl-row")).to_have_count(700)
        expect(page.locator(".tl-more")).to_have_count(0)

    in_browser(asgi_live_server, viewer, script)


def test_list_and_skill_page(asgi_live_server, owner, acme, agent, snapshot, owned_skill):  # noqa: F811
    for i in range(12):
        run = make_run(tenant=acme, agent=agent, snapshot=snapshot, end_user=f"user{i}@acme.example")
        start = timezone.now() - timedelta(hours=i)
        record_span(
            run=run,
            kind="tool_call",
            name=owned_skill.name,
            skill_name=owned_skill.name,
            started_at=start,
            ended_at=start + timedelta(milliseconds=40 + 30 * i),
            verdict="confirm" if i % 4 == 0 else "allow",
            error_class="timeout" if i % 5 == 0 else "",
            attributes={"airlock.result.bytes": 900 + 100 * i},
        )
    list_url = asgi_live_server.url + reverse("traces:list")
    skill_url = asgi_live_server.url + reverse("traces:skill", args=[owned_skill.name])

    def script(page):
        page.goto(list_url)
        expect(page.locator("tbody tr")).to_have_count(12)
        _shot(page, "list")
        page.goto(skill_url)
        expect(page.locator(".stat").first).to_contain_text("12")
        _shot(page, "skill")

    in_browser(asgi_live_server, owner, script)


def test_alerts_page_and_settings_form(asgi_live_server, owner, tenant_admin, run, owned_skill):  # noqa: F811
    from traces.models import AlertKind, AlertRule
    from traces.services import evaluate_alert_rules

    AlertRule.objects.create(
        skill_name=owned_skill.name, kind=AlertKind.ERROR_RATE, threshold=0.2, window=timedelta(hours=1), min_calls=2
    )
    start = timezone.now() - timedelta(minutes=3)
    for i in range(4):
        record_span(
            run=run,
            kind="tool_call",
            name=owned_skill.name,
            skill_name=owned_skill.name,
            started_at=start + timedelta(seconds=i),
            error_class="timeout" if i < 2 else "",
        )
    evaluate_alert_rules()
    alerts_url = asgi_live_server.url + reverse("traces:alerts")
    settings_url = asgi_live_server.url + reverse("traces:settings", args=["acme"])

    def alerts(page):
        page.goto(alerts_url)
        expect(page.locator("tbody tr")).to_contain_text("2 of 4 calls failed")
        _shot(page, "alerts")

    def settings_form(page):
        page.goto(settings_url)
        page.fill("#id_retention_days", "14")
        page.check("#id_forward_enabled")
        page.fill("#id_forward_endpoint", "https://collector.example:4318/v1/traces")
        page.click("main form.stack button[type=submit]")
        expect(page.locator(".messages")).to_contain_text("Trace settings saved.")
        _shot(page, "settings")

    in_browser(asgi_live_server, owner, alerts)
    in_browser(asgi_live_server, tenant_admin, settings_form)
    run.tenant.refresh_from_db()
    assert run.tenant.trace_retention == timedelta(days=14)
