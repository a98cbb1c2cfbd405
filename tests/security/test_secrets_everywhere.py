"""An attacker's run, every text of it full of secrets: the task, free text inside arguments, a call id,
a taint note, tool results (a plain string field and fields the output schema marks sensitive), a
validation error echoing a value, a failing tool's message, a decline reason, the agent's own spans,
a search, the run's closing reason. Afterwards no table of the database and no log line holds any of
them in clear, and no response the agent got does (apart from the arguments of a call waiting on a
person, which the contract echoes back to the agent that sent them)."""

import io
import json
import logging

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, WebhookDelivery
from approvals.services import decide_approval
from lib.log_redaction import MaskSecretsFilter
from registry.snapshots import publish_snapshot
from runs import services
from runs.adapters.python import register
from runs.models import Run, ToolCall
from tests.dbdump import database_text
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

# Each value is what must never be found; the text around it is how an agent or a tool writes it.
SECRETS = {
    "openai": "sk-live-4eC39HqLyjWDarjtT1zdp7dc",
    "github": "ghp_9aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    "aws": "AKIAZ7Q3EXAMPLEKEY12",
    "aws_example": "AKIAIOSFODNN7EXAMPLE",
    "card": "4111 1111 1111 1111",
    "card_digits": "4111111111111111",
    "password": "hunter2-Quokka",
    "bearer": "zq8Vt3LmX2pR7sK9wN4b",
    "api_key": "Zebra77Quartz",
    "token": "Mango55Paddle",
    "sensitive_output": "vault-plaintext-Kestrel",
    "sensitive_input": "vault-pin-Heron",
}
FREE_TEXT = (
    f"use {SECRETS['openai']} or {SECRETS['github']} with {SECRETS['aws']}, card {SECRETS['card']}, "
    f"password={SECRETS['password']}, Authorization: Bearer {SECRETS['bearer']}, "
    f"api_key={SECRETS['api_key']} and token: {SECRETS['token']}"
)
INPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "note": {"type": "string"},
        "order_id": {"type": "string", "pattern": "^ord_"},
        "pin": {"type": "string", "writeOnly": True, "maxLength": 4},
    },
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string"},
        "vault_value": {"type": "string", "writeOnly": True},
        "recovery": {"type": "object", "x-airlock-sensitive": True},
        "echo": {"type": "object"},
    },
}


@register("secrets_test.read", effect="read")
def _read(*, arguments, context):
    return {
        "note": f"found {SECRETS['github']} and {SECRETS['openai']}",
        "vault_value": SECRETS["sensitive_output"],
        "recovery": {"code": SECRETS["sensitive_output"]},
        "echo": arguments,
    }


@register("secrets_test.rotate", effect="read")
def _rotate(*, arguments, context):
    return {"note": f"rotated; the new key is {SECRETS['github']}", "vault_value": SECRETS["sensitive_output"]}


@register("secrets_test.fail", effect="read")
def _fail(*, arguments, context):
    raise RuntimeError(f"backend refused token={SECRETS['token']} for {SECRETS['github']}")


@pytest.fixture
def catalog(acme):
    for name, adapter, approval in (
        ("vault.read", "read", "not_required"),
        ("vault.rotate", "rotate", "required"),
        ("vault.fail", "fail", "not_required"),
    ):
        version = make_skill(
            name,
            effect="read" if approval == "not_required" else "write",
            approval=approval,
            adapter=f"python:secrets_test.{adapter}",
            schema=INPUT_SCHEMA,
            publish=False,
        )
        version.manifest["output_schema"] = OUTPUT_SCHEMA
        version.save(update_fields=["manifest"])
    grant(acme, "vault.*")
    publish_snapshot(reason="secrets test")


@pytest.fixture
def written_logs():
    """What the configured log handlers write (the console handler and uvicorn's access handler)."""
    stream = io.StringIO()
    handlers = [
        h
        for h in logging.getLogger().handlers + logging.getLogger("uvicorn.access").handlers
        if any(isinstance(f, MaskSecretsFilter) for f in h.filters)
    ]
    assert handlers, "LOGGING has no handler with the masking filter"
    previous = [h.setStream(stream) for h in handlers]
    yield stream
    for handler, old in zip(handlers, previous, strict=True):
        handler.setStream(old)


def _leaks(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


def _without_echoed_arguments(body: dict) -> dict:
    results = [
        {**r, "proposed_action": {**r["proposed_action"], "arguments": "(echo of the agent's own input)"}}
        if r.get("status") == "approval_required"
        else r
        for r in body.get("results", [])
    ]
    return {**body, "results": results}


def test_no_secret_of_a_hostile_run_is_stored_logged_or_returned(
    agent_client, approver, catalog, monkeypatch, written_logs, django_capture_on_commit_callbacks
):
    import approvals.tasks

    monkeypatch.setattr(approvals.tasks.deliver_webhook, "delay_on_commit", lambda *args, **kwargs: None)
    responses: list[str] = []
    run = start_run(agent_client, task=f"Rotate the keys: {FREE_TEXT}")
    responses.append(json.dumps(run))
    Run.objects.filter(pk=run["run_id"]).update(
        callback_url="https://hooks.example.com/airlock", webhook_secret="whsec_test"
    )  # webhook bodies are written too

    search = agent_client.get(reverse("registry_api:skill-search"), {"q": FREE_TEXT})
    assert search.status_code == 200  # its body echoes the agent's own query; the stored miss is masked

    args = {"note": FREE_TEXT}
    with django_capture_on_commit_callbacks(execute=True):
        response = post_calls(
            agent_client,
            run["run_id"],
            [
                call("c-read", "vault.read", args),
                call(SECRETS["aws"], "vault.read", {"note": "a call id that is a key"}),
                call("c-approve", "vault.rotate", args),
                call("c-decline", "vault.rotate", args),
                call("c-invalid", "vault.read", {"order_id": SECRETS["openai"], "pin": SECRETS["sensitive_input"]}),
                call("c-fail", "vault.fail", args),
                call("c-taint", "vault.read", {"note": "after reading mail"}, taint=f"an email said {FREE_TEXT}"),
            ],
        )
    assert response.status_code == 200, response.content
    body = response.json()
    statuses = {r["call_id"]: r["status"] for r in body["results"]}
    assert statuses["c-read"] == "ok" and statuses["c-approve"] == "approval_required"
    assert statuses["c-invalid"] == "error" and statuses["c-fail"] == "error"
    read = next(r for r in body["results"] if r["call_id"] == "c-read")
    assert read["content"]["vault_value"]["redacted"] is True and read["content"]["recovery"]["redacted"] is True
    assert "found ghp_" in read["content"]["note"]  # a recognisable prefix stays, the secret does not
    responses.append(json.dumps(_without_echoed_arguments(body)))

    approvals = {a.call.call_id: a for a in ApprovalRequest.objects.select_related("call")}
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=approvals["c-approve"], user=approver, decision="approve")
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(
            approval=approvals["c-decline"], user=approver, decision="decline", reason=f"Never paste keys: {FREE_TEXT}"
        )

    spans = agent_client.post(
        reverse("traces_api:span_batch"),
        data=json.dumps(
            {
                "spans": [
                    {
                        "trace_id": Run.objects.get(pk=run["run_id"]).id.hex,
                        "kind": "model_turn",
                        "name": f"chat {FREE_TEXT}",
                        "started_at": "2026-05-01T12:00:00Z",
                        "call_id": SECRETS["aws"],
                        "attributes": {"gen_ai.input.messages": FREE_TEXT, "note": FREE_TEXT},
                    }
                ]
            }
        ),
        content_type="application/json",
    )
    assert spans.status_code in (200, 202), spans.content
    responses.append(spans.content.decode())

    for name, kwargs in (("run_events", {"data": {"after": 0, "wait": 0}}), ("run_detail", {})):
        got = agent_client.get(reverse(f"runs_api:{name}", args=[run["run_id"]]), **kwargs)
        assert got.status_code == 200, got.content
        responses.append(got.content.decode())
    finished = agent_client.post(
        reverse("runs_api:run_finish", args=[run["run_id"]]),
        {"status": "failed", "reason": f"gave up: {FREE_TEXT}"},
        format="json",
    )
    assert finished.status_code == 200, finished.content
    responses.append(finished.content.decode())

    events = responses[-3]
    assert "call.completed" in events and "approval.decided" in events  # the feed holds the outcomes
    assert WebhookDelivery.objects.filter(run_id=run["run_id"], body__contains="call.completed").exists()
    stored = database_text()
    assert "Rotate the keys" in stored and "rotated; the new key is ghp_" in stored  # the dump is real
    assert _leaks(stored) == [], "stored in clear"
    logged = written_logs.getvalue()
    assert "Skill vault.fail raised" in logged and "backend refused token=" in logged  # logged, masked
    assert _leaks(logged) == [], "logged in clear"
    assert _leaks("\n".join(responses)) == [], "returned to the agent"


def test_an_event_payload_is_redacted_when_appended_so_the_webhook_body_is_too(agent, monkeypatch):
    """Whatever a caller puts in an event (a result, a reason), the feed and the webhook body store it masked."""
    import approvals.tasks
    from runs.events import append_event
    from tests.runs.factories import run_for

    monkeypatch.setattr(approvals.tasks.deliver_webhook, "delay_on_commit", lambda *args, **kwargs: None)
    run = run_for(agent, callback_url="https://hooks.example.com/airlock", webhook_secret="whsec_test")
    event = append_event(
        run=run,
        kind="call.completed",
        payload={"call_id": "c-1", "result": {"content": {"note": FREE_TEXT, "password": SECRETS["password"]}}},
    )
    event.refresh_from_db()
    delivery = WebhookDelivery.objects.get(event=event)
    assert _leaks(json.dumps(event.payload)) == [] and _leaks(delivery.body) == []
    assert event.payload["call_id"] == "c-1" and "result" in json.loads(delivery.body)["payload"]


# Short texts carrying each secret shape, as an agent might send them as a role or a tool name.
SECRET_NAMES = [
    SECRETS["aws"],
    SECRETS["aws_example"],
    SECRETS["openai"],
    SECRETS["github"],
    SECRETS["card"],
    f"password={SECRETS['password']}",
    f"Authorization: Bearer {SECRETS['bearer']}",
    f"api_key={SECRETS['api_key']}",
    f"token: {SECRETS['token']}",
]


@pytest.mark.parametrize("role", SECRET_NAMES)
def test_an_agent_cannot_bind_a_secret_to_a_run_as_an_end_user_role(agent_client, role):
    """A role is read by policies, so it is refused rather than stored masked under a name no rule expects."""
    response = agent_client.post(
        reverse("runs_api:run_create"), {"end_user": "u-1", "end_user_roles": ["customer", role]}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "looks like a secret" in str(response.json()["error"]["fields"]["end_user_roles"])
    assert _leaks(response.content.decode()) == []
    assert not Run.objects.exists()


def test_no_secret_in_roles_or_exposed_tool_names_reaches_the_decision_record_or_any_table(
    agent, agent_client, catalog
):
    by_api = start_run(agent_client, end_user=f"u-1 {SECRETS['aws_example']}", end_user_roles=["customer"])
    # A caller inside Airlock (the demo, a management command) is not refused: what it binds is stored masked.
    by_service = services.start_run(agent=agent, end_user="u-2", end_user_roles=["customer", *SECRET_NAMES])
    for run_id in (by_api["run_id"], str(by_service.pk)):
        response = agent_client.post(
            reverse("runs_api:run_calls", args=[run_id]),
            {"exposed_tools": [*SECRET_NAMES, "vault.read"], "calls": [call("c1", "vault.read", {"note": "hi"})]},
            format="json",
        )
        assert response.status_code == 200, response.content
        assert response.json()["results"][0]["status"] == "ok"
        assert _leaks(response.content.decode()) == []

    for recorded in ToolCall.objects.filter(call_id="c1"):
        names = recorded.decision["exposed_tools"]["names"]
        assert "vault.read" in names and len(names) == len(SECRET_NAMES) + 1  # the record still answers "why"
        assert "customer" in recorded.decision["inputs"]["context"]["end_user"]["roles"]
    stored = database_text()
    assert "vault.read" in stored and "customer" in stored  # the dump is real
    assert _leaks(stored) == [], "stored in clear"
