"""A whole run through the real API, gate and approvals: its timeline, its why panels, and a grep of
every text column in the database for the secrets its payloads carried."""

import json

import pytest
from django.urls import reverse

from runs.adapters.python import register
from tests.dbdump import database_text
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span, Trace

pytestmark = pytest.mark.django_db

SECRETS = {
    "openai": "sk-proj-Zq8fJk2LmN4pQ7rS9tUvWx1Y",
    "github": "ghp_9aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    "aws": "AKIAZ7Q3EXAMPLEKEY12",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYXJvbEBleGFtcGxlLmNvbSJ9.c2lnbmF0dXJlLXZhbHVlLWhlcmU",
    "pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "password": "correct-horse-battery-staple-42",
    "card": "4242424242424242",
}
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id"],
    "properties": {
        "order_id": {"type": "string", "pattern": "^ord_"},
        "note": {"type": "string"},
        "password": {"type": "string", "format": "password"},
        "card": {"type": "string", "x-airlock-sensitive": True},
    },
}


@register("traces_test.receipt", effect="read")
def receipt(*, arguments, context):
    return {"ok": True, "receipt": "rcpt_1", "note": "done"}


@pytest.fixture
def catalog(acme):
    make_skill("orders.lookup", effect="read", adapter="python:traces_test.receipt", schema=SCHEMA, publish=False)
    make_skill("orders.notify", effect="external", adapter="python:traces_test.receipt", schema=SCHEMA, publish=False)
    make_skill("orders.delete", effect="write", adapter="python:traces_test.receipt", schema=SCHEMA, publish=False)
    grant(acme, "orders.*")
    published_policy([rule("no-deletes", "deny", "skill.name == 'orders.delete'")], scope="tenant", tenant=acme)
    make_skill("orders.publisher", adapter="python:traces_test.receipt")  # publishes the snapshot


def args(**extra) -> dict:
    return {
        "order_id": "ord_1",
        "note": f"keys {SECRETS['openai']} {SECRETS['github']} {SECRETS['aws']} "
        f"bearer {SECRETS['jwt']} {SECRETS['pem']}",
        "password": SECRETS["password"],
        "card": SECRETS["card"],
        **extra,
    }


def _run_everything(agent_client, approver, django_capture_on_commit_callbacks):
    from approvals.models import ApprovalRequest
    from approvals.services import decide_approval

    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_calls(
            agent_client,
            run["run_id"],
            [
                call("c-allow", "orders.lookup", args()),
                call("c-confirm", "orders.notify", args()),
                call("c-deny", "orders.delete", args()),
                call("c-invalid", "orders.lookup", args(order_id="nope")),
            ],
        )
    assert response.status_code == 200, response.content
    statuses = {r["call_id"]: r["status"] for r in response.json()["results"]}
    assert statuses["c-allow"] == "ok" and statuses["c-confirm"] == "approval_required"
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=ApprovalRequest.objects.get(), user=approver, decision="approve")
    return Trace.objects.get(run_id=run["run_id"])


def test_a_full_run_has_a_complete_timeline(
    agent_client, approver, catalog, client, django_capture_on_commit_callbacks
):
    trace = _run_everything(agent_client, approver, django_capture_on_commit_callbacks)
    spans = list(Span.objects.filter(trace=trace).select_related("call"))
    by_call: dict[str, list[Span]] = {}
    for span in spans:
        by_call.setdefault(span.call.call_id if span.call else "", []).append(span)
    verdicts = {cid: {s.verdict for s in group if s.kind == "tool_call"} for cid, group in by_call.items()}
    assert "allow" in verdicts["c-allow"] and "deny" in verdicts["c-deny"] and "confirm" in verdicts["c-confirm"]
    assert any(s.error_class == "validation" for s in by_call["c-invalid"])
    confirm_outcomes = {s.outcome for s in by_call["c-confirm"]}
    assert "approved" in confirm_outcomes and "succeeded" in confirm_outcomes
    allowed = next(s for s in by_call["c-allow"] if s.kind == "tool_call")
    assert allowed.attributes["gen_ai.security.decision.type"] == "allow"
    assert allowed.attributes["gen_ai.tool.call.id"] == "c-allow" and len(allowed.arguments_sha256) == 64
    trace.refresh_from_db()
    assert trace.span_count == len(spans)

    client.force_login(approver)
    page = client.get(reverse("traces:detail", args=[trace.pk])).content.decode()
    for name in ("orders.lookup", "orders.notify", "orders.delete"):
        assert name in page
    assert "tl-mark deny" in page and "tl-mark approval" in page and "tl-bar k-tool_call err" in page
    confirm_call = by_call["c-confirm"][0].call
    why = client.get(reverse("traces:why", args=[trace.pk, confirm_call.pk])).content.decode()
    assert "Approval required; approved." in why and "approver" in why
    assert "orders.notify was among them" in why  # the exposure recorded by the gate with the call
    deny_call = by_call["c-deny"][0].call
    why = client.get(reverse("traces:why", args=[trace.pk, deny_call.pk])).content.decode()
    assert "no-deletes" in why


def test_no_raw_secret_reaches_the_database(agent_client, approver, catalog, django_capture_on_commit_callbacks):
    trace = _run_everything(agent_client, approver, django_capture_on_commit_callbacks)
    # and the agent's own spans through both ingest paths, carrying the same secrets
    agent_client.post(
        reverse("traces_api:span_batch"),
        data=json.dumps(
            {
                "spans": [
                    {
                        "trace_id": trace.trace_id,
                        "kind": "model_turn",
                        "name": "chat",
                        "started_at": "2026-05-01T12:00:00Z",
                        "attributes": {
                            "gen_ai.input.messages": args()["note"],
                            "gen_ai.tool.call.arguments": json.dumps(args()),
                            "password": SECRETS["password"],
                        },
                    }
                ]
            }
        ),
        content_type="application/json",
    )
    agent_client.post(
        reverse("traces_api:span_batch"),
        data=json.dumps(
            {
                "spans": [
                    {
                        "trace_id": trace.trace_id,
                        "kind": "tool_call",
                        "name": "orders.lookup",
                        "skill_name": "orders.lookup",
                        "started_at": "2026-05-01T12:00:01Z",
                        "attributes": {"gen_ai.tool.call.arguments": json.dumps(args())},
                    }
                ]
            }
        ),
        content_type="application/json",
    )
    dump = database_text()
    assert "ord_1" in dump  # the dump does see payload values
    leaked = [name for name, secret in SECRETS.items() if secret in dump]
    assert leaked == []
