"""The OpenAI Agents SDK adapter, driven by the framework's own ScriptedModel (no network model)."""

import json

import httpx
import pytest
from agents import Agent, Runner, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from airlock_sdk.integrations.openai_agents import AirlockAgents, model_name

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
    results = []
    for call in body(request)["calls"]:
        if call["name"] == "customer.list_orders":
            results.append(
                {"call_id": call["call_id"], "status": "ok", "is_error": False, "content": {"orders": ["o-5001"]}}
            )
        else:
            results.append(
                {
                    "call_id": call["call_id"],
                    "status": "approval_required",
                    "is_error": False,
                    "approval_id": 12,
                    "proposed_action": {"skill": call["name"]},
                    "reason": "external recipient",
                }
            )
    return httpx.Response(200, json={"run_id": "r-1", "run_status": "running", "results": results})


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)
    set_tracing_disabled(True)  # the framework's trace export would try OpenAI's servers
    yield
    set_tracing_disabled(False)


def test_model_names_are_valid_openai_tool_names():
    assert model_name("billing.create_refund_request") == "billing__create_refund_request"


async def test_one_turn_is_one_batch_and_a_confirm_is_an_interruption_resolved_from_the_events(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running", "snapshot": 1}))
    fake.on("POST", "/api/v1/runs/r-1/calls", gate)
    fake.on("POST", "/api/v1/traces/spans", httpx.Response(202, json={"stored": 1}))
    fake.on("GET", "/api/v1/runs/r-1/events", httpx.Response(200, json={"events": DECIDED, "next_cursor": 2}))
    airlock = fake.client(tmp_path)
    airlock_agents = AirlockAgents(airlock.start_run(end_user="customer:c-100", task="Orders"))
    model = ScriptedModel(
        [
            [
                function_call("customer__list_orders", {"customer_id": "c-100"}, call_id="call_1"),
                function_call("support__send_email", {"to": "ada@example.org"}, call_id="call_2"),
            ],
            [assistant_message("Done: one order, email sent after approval.")],
        ]
    )
    agent = Agent(name="support", model=airlock_agents.model(model), tools=airlock_agents.tools())

    result = await airlock_agents.invoke(agent, "Tell the customer about their orders")

    [interruption] = result.interruptions
    assert interruption.raw_item.call_id == "call_2"
    sent = [[c["call_id"] for c in body(r)["calls"]] for r in fake.sent("POST", "/api/v1/runs/r-1/calls")]
    assert sent == [["call_1", "call_2"]]  # the whole turn, in one batch
    [batch] = fake.sent("POST", "/api/v1/runs/r-1/calls")
    assert body(batch)["exposed_tools"] == ["customer.list_orders", "support.send_email"]  # the turn's tools
    state = await airlock_agents.resolve(await RunState.from_string(agent, result.to_state().to_string()))
    result = await airlock_agents.invoke(agent, state)

    assert result.final_output == "Done: one order, email sent after approval."
    outputs = [
        item for item in model.calls[-1].input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert json.loads(outputs[0]["output"]) == {"orders": ["o-5001"]}
    assert json.loads(outputs[1]["output"]) == {"status": "sent"}  # the approved outcome, not "pending"
    assert len(fake.sent("POST", "/api/v1/runs/r-1/calls")) == 1  # nothing proposed twice
    spans = [body(r)["spans"][0] for r in fake.sent("POST", "/api/v1/traces/spans")]
    assert sorted(s["attributes"]["gen_ai.operation.name"] for s in spans) == [
        "chat",
        "chat",
        "invoke_agent",
        "invoke_agent",
    ]
    model.assert_complete()


DECIDED = [
    {
        "id": 1,
        "kind": "approval.decided",
        "payload": {"approval_id": 12, "call_id": "call_2", "decision": "approved", "decided_by": "alice"},
    },
    {
        "id": 2,
        "kind": "call.completed",
        "payload": {
            "approval_id": 12,
            "call_id": "call_2",
            "result": {"call_id": "call_2", "status": "ok", "is_error": False, "content": {"status": "sent"}},
        },
    },
]


async def test_a_denied_call_reaches_the_model_as_a_typed_error(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS[:1]}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running"}))
    fake.on("POST", "/api/v1/traces/spans", httpx.Response(503))  # tracing down: the agent goes on
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
    airlock_agents = AirlockAgents(airlock.start_run(end_user="u", task="t"))
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "c-1"}, call_id="call_1")],
            [assistant_message("I may not do that.")],
        ]
    )
    agent = Agent(name="a", model=airlock_agents.model(model), tools=airlock_agents.tools())
    result = await airlock_agents.invoke(agent, "go")
    assert result.final_output == "I may not do that."
    [output] = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert json.loads(output["output"])["error"]["class"] == "authorization"


async def test_a_services_refusal_reaches_the_model_in_its_own_words(tmp_path):
    """What the gate relays of a 422 (issue 39, part 4): the model reads the service's message, and can fix the call."""
    refusal = {
        "class": "validation",
        "code": "downstream_rejected",
        "message": "The skill's service answered HTTP 422.",
        "downstream_message": "customer_id must look like c-<digits>",
    }
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS[:1]}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running"}))
    fake.on("POST", "/api/v1/traces/spans", httpx.Response(202, json={"stored": 1}))
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.Response(
            200, json={"results": [{"call_id": "call_1", "status": "error", "is_error": True, "error": refusal}]}
        ),
    )
    airlock = fake.client(tmp_path)
    airlock_agents = AirlockAgents(airlock.start_run(end_user="u", task="t"))
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "100"}, call_id="call_1")],
            [assistant_message("Which customer id?")],
        ]
    )
    agent = Agent(name="a", model=airlock_agents.model(model), tools=airlock_agents.tools())
    await airlock_agents.invoke(agent, "go")
    [output] = [i for i in model.calls[-1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert json.loads(output["output"]) == {"error": refusal}


async def test_tools_without_the_model_wrapper_still_go_through_the_gate(tmp_path):
    """A developer who wires only the tools: each call is a batch of its own, and the gate still decides."""
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS[:1]}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running"}))
    fake.on("POST", "/api/v1/runs/r-1/calls", gate)
    airlock = fake.client(tmp_path)
    airlock_agents = AirlockAgents(airlock.start_run(end_user="u", task="t"))
    model = ScriptedModel(
        [
            [function_call("customer__list_orders", {"customer_id": "c-1"}, call_id="call_1")],
            [assistant_message("One order.")],
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, tools=airlock_agents.tools()), "go")
    assert result.final_output == "One order."
    assert [body(r)["calls"][0]["call_id"] for r in fake.sent("POST", "/api/v1/runs/r-1/calls")] == ["call_1"]
