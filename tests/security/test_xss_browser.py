"""XSS: tool arguments, tool results and skill text carrying HTML and script are shown inert in the
inbox, the approval page, the timeline, the span panel, the run page and the skill pages. A real
Chromium loads each page; no script may run (window.__xss stays undefined, no dialog opens) and the
payload must be visible as text, so the test cannot pass by the payload simply not being shown."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.browser.conftest import asgi_live_server, browser, login_as, page  # noqa: F401 - fixtures

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__xss=1;alert(1)</script>"
IMG = '<img src=x onerror="window.__xss=2;alert(2)">'
SVG = "<svg onload=window.__xss=3>"
QUOTE = "\"'><b onmouseover=window.__xss=4>x</b>"
PAYLOAD = f"{SCRIPT} {IMG} {SVG} {QUOTE}"


@pytest.fixture
def hostile_world(acme, approver, agent_client, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the in-process API client's host
    from runs.adapters.python import register
    from tests.runs.factories import grant, make_skill

    @register("xss.echo", effect="read")
    def echo(*, arguments, context):
        return {"echo": arguments.get("text"), "html": PAYLOAD}

    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "description": PAYLOAD}},
        "additionalProperties": False,
    }
    reader = make_skill("xss.read_page", adapter="python:xss.echo", schema=schema, publish=False, status="draft")
    manifest = dict(reader.manifest, description=f"Reads a page. {PAYLOAD}")
    reader.manifest, reader.description = manifest, manifest["description"]
    reader.save(update_fields=["manifest", "description"])
    type(reader).objects.filter(pk=reader.pk).update(status="active")  # published versions are immutable
    make_skill(
        "xss.post_reply",
        adapter="python:xss.echo",
        schema=schema,
        effect="external",
        approval="required",
        publish=False,
    )
    grant(acme, "xss.*")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="xss")
    run = agent_client.post(
        reverse("runs_api:run_create"), {"end_user": f"user {IMG}", "task": PAYLOAD}, format="json"
    ).json()
    results = agent_client.post(
        reverse("runs_api:run_calls", kwargs={"run_id": run["run_id"]}),
        {
            "calls": [
                {"call_id": "c1", "name": "xss.read_page", "arguments": {"text": PAYLOAD}},
                {"call_id": "c2", "name": "xss.post_reply", "arguments": {"text": PAYLOAD}},
            ]
        },
        format="json",
    ).json()
    statuses = [r["status"] for r in results["results"]]
    assert statuses == ["ok", "approval_required"], results
    from traces.models import Trace

    trace = Trace.objects.get(run_id=run["run_id"])
    span = trace.spans.exclude(call=None).first()
    return {"approval_id": results["results"][1]["approval_id"], "run_id": run["run_id"], "trace": trace, "span": span}


def _assert_inert(page, url: str) -> None:  # noqa: F811 - the page fixture's object
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    response = page.goto(url)
    assert response is not None and response.status == 200, f"{url}: {response and response.status}"
    page.wait_for_load_state("networkidle")
    page.mouse.move(10, 10)
    for element in page.locator("b").all()[:20]:  # the onmouseover payload, were it live markup
        if element.is_visible():
            element.hover()
    assert page.evaluate("typeof window.__xss") == "undefined", f"a payload ran on {url}"
    assert not dialogs, f"a dialog opened on {url}: {dialogs}"


def test_hostile_text_is_inert_everywhere_it_is_shown(
    asgi_live_server,
    page,
    login_as,
    approver,
    owner,  # noqa: F811
    hostile_world,
):
    login_as(approver)
    base = asgi_live_server.url
    pages = {
        "inbox": reverse("approvals:inbox"),
        "approval": reverse("approvals:detail", kwargs={"approval_id": hostile_world["approval_id"]}),
        "approval card": reverse("approvals:card", kwargs={"approval_id": hostile_world["approval_id"]}),
        "timeline": reverse("traces:detail", kwargs={"pk": hostile_world["trace"].pk}),
        "span": reverse(
            "traces:span", kwargs={"pk": hostile_world["trace"].pk, "span_id": hostile_world["span"].span_id}
        ),
        "run": reverse("runs:run_detail", kwargs={"run_id": hostile_world["run_id"]}),
        "skill (registry)": reverse("registry:skill", kwargs={"name": "xss.read_page"}),
    }
    owner_pages = {
        "skill (traces, owner)": reverse("traces:skill", kwargs={"skill_name": "xss.read_page"}),
        "skill (registry, owner)": reverse("registry:skill", kwargs={"name": "xss.read_page"}),
    }
    shown = {}
    for label, path in [*pages.items(), *owner_pages.items()]:
        if label == next(iter(owner_pages)):
            login_as(owner)  # the per-skill metrics page is its owners'
        _assert_inert(page, base + path)
        text = page.inner_text("body")
        shown[label] = "window.__xss" in text or "onerror" in text or "<script>" in text
    # The payload is on screen as text somewhere on every page that displays it (arguments, results,
    # descriptions): escaping, not omission.
    assert shown["approval"] and shown["skill (registry)"], shown
    assert sum(shown.values()) >= 4, shown
