"""The Content-Security-Policy in a real Chromium: the main console pages load, logged in, with no
policy violation and no console error, and the behaviour that moved out of inline script still works
(htmx's live CEL check in the policy editor, the timeline's span panel, the live inbox websocket,
confirm dialogs, the inline-style geometry now set from static/js/console.js)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.browser.conftest import asgi_live_server, browser, login_as, page  # noqa: F401 - fixtures

pytestmark = pytest.mark.browser

# Runs before any page script and outside the page's policy (Playwright injects it over CDP).
WATCH_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def console_world(acme, agent_client, owner_team, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the in-process API client's host
    from console.models import Role
    from policies.models import Policy, PolicyVersion
    from registry.snapshots import publish_snapshot
    from runs.adapters.python import register
    from tests.conftest import make_user
    from tests.runs.factories import grant, make_skill

    @register("csp.echo", effect="read")
    def echo(*, arguments, context):
        return {"echo": arguments.get("text")}

    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "pattern": "^[a-z ]+$"}},
        "additionalProperties": False,
    }
    make_skill("csp.read_page", adapter="python:csp.echo", schema=schema, publish=False)
    make_skill(
        "csp.post_reply",
        adapter="python:csp.echo",
        schema=schema,
        effect="external",
        approval="required",
        publish=False,
    )
    grant(acme, "csp.*")
    publish_snapshot(reason="csp")
    run = agent_client.post(reverse("runs_api:run_create"), {"end_user": "u-1", "task": "reply"}, format="json").json()
    results = agent_client.post(
        reverse("runs_api:run_calls", kwargs={"run_id": run["run_id"]}),
        {
            "calls": [
                {"call_id": "c1", "name": "csp.read_page", "arguments": {"text": "hello"}},
                {"call_id": "c2", "name": "csp.post_reply", "arguments": {"text": "hi there"}},
            ]
        },
        format="json",
    ).json()
    assert [r["status"] for r in results["results"]] == ["ok", "approval_required"], results
    from traces.models import Trace

    policy = Policy.objects.create(name="csp policy", scope="tenant", tenant=acme)
    PolicyVersion.objects.create(
        policy=policy,
        number=1,
        status="draft",
        rules=[{"id": "r1", "verdict": "allow", "condition": "true", "reason": "fine"}],
    )
    user = make_user("csp-everything", tenant=acme, roles=[Role.APPROVER, Role.VIEWER, Role.ADMIN], superuser=True)
    owner_team.members.add(user)
    return {
        "user": user,
        "approval_id": results["results"][1]["approval_id"],
        "run_id": run["run_id"],
        "trace": Trace.objects.get(run_id=run["run_id"]),
        "policy": policy,
    }


def _visit(page, url: str, problems: list[str]) -> None:  # noqa: F811 - the page fixture's object
    response = page.goto(url)
    assert response is not None and response.status == 200, f"{url}: {response and response.status}"
    assert "script-src 'self'" in (response.headers.get("content-security-policy") or ""), url
    page.wait_for_load_state("networkidle")
    problems += [f"{url}: {v}" for v in page.evaluate("window.__csp")]


def test_main_pages_load_under_the_policy_and_htmx_still_works(
    asgi_live_server,
    page,
    login_as,  # noqa: F811
    console_world,
):
    errors: list[str] = []
    page.context.add_init_script(WATCH_VIOLATIONS)
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on("response", lambda response: response.status >= 400 and errors.append(f"{response.status} {response.url}"))
    login_as(console_world["user"])
    base, violations = asgi_live_server.url, []
    trace, policy = console_world["trace"], console_world["policy"]
    pages = [
        reverse("console:home"),
        reverse("approvals:inbox"),
        reverse("approvals:detail", kwargs={"approval_id": console_world["approval_id"]}),
        reverse("runs:run_list"),
        reverse("runs:run_detail", kwargs={"run_id": console_world["run_id"]}),
        reverse("traces:list"),
        reverse("traces:detail", kwargs={"pk": trace.pk}),
        reverse("registry:catalog"),
        reverse("registry:skill", kwargs={"name": "csp.read_page"}),
        reverse("traces:skill", kwargs={"skill_name": "csp.read_page"}),
        reverse("policies:policy_list"),
        reverse("policies:policy_detail", kwargs={"policy_id": policy.pk}),
    ]
    for path in pages:
        _visit(page, base + path, violations)

    # htmx: the policy editor checks a CEL condition as it is typed and swaps in the answer.
    assert page.locator(".cond-errors").first.inner_text().strip() == ""
    condition = page.locator("textarea[name=condition]").first
    condition.fill("args.amount >")
    condition.press("Space")
    page.wait_for_function("() => document.querySelector('.cond-errors').textContent.trim().length > 0")

    # htmx on the timeline: a row loads its span into the side panel; static/js/traces.js selects the row;
    # the bars got their geometry from data-* attributes, not style=.
    _visit(page, base + reverse("traces:detail", kwargs={"pk": trace.pk}), violations)
    assert page.evaluate("document.querySelector('.tl-bar').style.width") not in ("", None)
    page.locator(".tl-row").first.click()
    page.wait_for_function("() => !document.querySelector('#side').textContent.includes('Select a span')")
    assert "selected" in (page.locator(".tl-row").first.get_attribute("class") or "")

    # The live inbox: its websocket (connect-src ws://<this host>, the exact-origin check) connects.
    _visit(page, base + reverse("approvals:inbox"), violations)
    page.wait_for_function("() => document.getElementById('live-status').textContent.trim() === 'live'")

    assert violations == [], violations
    assert errors == [], errors

    # The watcher itself works: markup an attacker might inject is blocked, and reported.
    page.evaluate("""document.body.insertAdjacentHTML('beforeend',
        '<div id="injected" style="position:fixed;top:0">x</div><img src=x onerror="window.__ran=1">')""")
    page.wait_for_function("() => window.__csp.length >= 2")
    assert page.evaluate("window.__ran") is None
    assert page.evaluate("getComputedStyle(document.getElementById('injected')).position") != "fixed"


def test_confirm_dialogs_still_guard_destructive_forms(
    asgi_live_server,
    page,
    login_as,
    console_world,  # noqa: F811
    acme,
):
    """Destructive buttons used onsubmit="return confirm(...)"; now static/js/console.js asks (stopping a run
    here: a grant's revocation moved to its own page, where the preview and the reason guard it)."""
    from runs.models import Run, RunStatus

    login_as(console_world["user"])
    page.goto(asgi_live_server.url + reverse("runs:run_detail", kwargs={"run_id": console_world["run_id"]}))
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.locator("#stop-run textarea, #stop-run input[name=reason]").first.fill("looping on refunds")
    page.locator("#stop-run button").click()
    assert asked and "Stop this run?" in asked[0]
    assert Run.objects.get(pk=console_world["run_id"]).status != RunStatus.STOPPED, (
        "dismissing the dialog must not submit the form"
    )
