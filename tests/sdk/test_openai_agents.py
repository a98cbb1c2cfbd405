"""The OpenAI Agents SDK adapter, driven by the framework's own ScriptedModel (no network model)."""

import json

import httpx
import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from airlock_sdk.integrations.openai_agents import airlock_function_tools, model_name

from tests.sdk.fakes import FakeAirlock, body

TOOLS = [
    {
        "type": "function",
        "name": "customer__list_orders",
        "description": "List a customer's orders.",
        "parameters": {
            "type": "object",
            "properties": {"customer_id": {"type": "string"}},
            "required": ["customer_id"],
            "additionalProperties": False,
        },
        "strict": False,
    },
    {
        "type": "function",
        "name": "support__send_email",
        "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        "strict": False,
    },
]


def gate(request: httpx.Request) -> httpx.Response:
    [call] = body(request)["calls"]
    if call["name"] == "customer.list_orders":
        result = {"call_id": call["call_id"], "status": "ok", "is_error": False, "content": {"orders": ["o-5001"]}}
    else:
        result = {
            "call_id": call["call_id"],
            "status": "approval_required",
            "is_error": False,
            "approval_id": 12,
            "proposed_action": {"skill": call["name"]},
            "reason": "external recipient",
        }
    return httpx.Response(200, json={"run_id": "r-1", "run_status": "running", "results": [result]})


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)
    set_tracing_disabled(True)  # the framework's trace export would try OpenAI's servers
    yield
    set_tracing_disabled(False)


def test_model_names_are_valid_openai_tool_names():
    assert model_name("billing.create_refund_request") == "billing__create_refund_request"


async def test_scripted_model_tool_calls_pass_through_the_gate_and_wait_for_approval(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running", "snapshot": 1}))
    fake.on("POST", "/api/v1/runs/r-1/calls", gate)
    fake.on(
        "GET",
        "/api/v1/runs/r-1/events",
        httpx.Response(
            200,
            json={
                "events": [
                    {
                        "id": 1,
                        "kind": "approval.decided",
                        "payload": {
                            "approval_id": 12,
                            "call_id": "call_2",
                            "decision": "approved",
                            "decided_by": "alice",
                        },
                    },
                    {
                        "id": 2,
                        "kind": "call.completed",
                        "payload": {
                            "approval_id": 12,
                            "call_id": "call_2",
                            "result": {
                                "call_id": "call_2",
                                "status": "ok",
                                "is_error": False,
                                "content": {"status": "sent"},
                            },
                        },
                    },
                ],
                "next_cursor": 2,
            },
        ),
    )
    airlock = fake.client(tmp_path)
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer about their orders")
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "c-100"}, call_id="call_1")],
            [function_call("support__send_email", {"to": "ada@example.org"}, call_id="call_2")],
            [assistant_message("Done: one order, email sent after approval.")],
        ]
    )
    agent = Agent(name="support", model=model, tools=airlock_function_tools(airlock, run))

    result = await Runner.run(agent, "Tell the customer about their orders")

    assert result.final_output == "Done: one order, email sent after approval."
    sent = [body(r)["calls"][0] for r in fake.sent("POST", "/api/v1/runs/r-1/calls")]
    assert [(c["call_id"], c["name"]) for c in sent] == [
        ("call_1", "customer.list_orders"),
        ("call_2", "support.send_email"),
    ]
    outputs = [
        item for item in model.calls[-1].input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert json.loads(outputs[0]["output"]) == {"orders": ["o-5001"]}
    assert json.loads(outputs[1]["output"]) == {"status": "sent"}  # the approved outcome, not "pending"
    model.assert_complete()


async def test_a_denied_call_reaches_the_model_as_a_typed_error(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS[:1]}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running"}))
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.Response(
            200,
            json={
                "results": [
                    {
                        "call_id": "call_1",
                        "status": "error",
                        "is_error": True,
                        "error": {"class": "authorization", "code": "no_grant", "message": "No grant"},
                    }
                ]
            },
        ),
    )
    airlock = fake.client(tmp_path)
    run = airlock.start_run(end_user="u", task="t")
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "c-1"}, call_id="call_1")],
            [assistant_message("I may not do that.")],
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, tools=airlock_function_tools(airlock, run)), "go")
    assert result.final_output == "I may not do that."
    [output] = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert json.loads(output["output"])["error"]["class"] == "authorization"


def test_against_a_live_airlock_the_approval_lands_in_the_inbox_and_the_model_gets_the_outcome(
    asgi_live_server, catalog, agent_and_key, approver_token, tmp_path
):
    import threading

    from airlock_sdk import Airlock, ClientSkillRegistry

    from approvals.models import ApprovalRequest
    from tests.sdk.conftest import OUTBOX

    airlock = Airlock(asgi_live_server.url, agent_and_key[1], cache_dir=tmp_path, client_skills=ClientSkillRegistry())
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer about their orders")
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "c-100"}, call_id="call_1")],
            [
                function_call(
                    "support__send_email",
                    {"to": "ada@example.org", "subject": "Orders", "body": "You have two orders."},
                    call_id="call_2",
                )
            ],
            [assistant_message("Sent.")],
        ]
    )

    def approve_when_it_arrives():  # the person in the inbox, through the approver API
        headers = {"Authorization": f"Bearer {approver_token}"}
        for _ in range(200):
            # SQLite's shared in-memory test database answers "table is locked" to overlapping
            # requests; like any client, the approver tries again.
            response = httpx.get(
                f"{asgi_live_server.url}/api/v1/approvals", params={"status": "pending"}, headers=headers
            )
            pending = response.json()["results"] if response.status_code == 200 else []
            if pending:
                httpx.post(
                    f"{asgi_live_server.url}/api/v1/approvals/{pending[0]['id']}/decision",
                    json={"decision": "approve"},
                    headers=headers,
                )
                return
            threading.Event().wait(0.05)

    approver = threading.Thread(target=approve_when_it_arrives)
    approver.start()
    agent = Agent(name="support", model=model, tools=airlock_function_tools(airlock, run, approval_timeout=30))
    result = Runner.run_sync(agent, "Tell the customer about their orders")
    approver.join()

    assert result.final_output == "Sent."
    assert ApprovalRequest.objects.get(call__run_id=run.run_id).call.call_id == "call_2"
    assert [m["to"] for m in OUTBOX] == ["ada@example.org"]
    outputs = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert json.loads(outputs[1]["output"])["status"] == "sent"
