"""The LangGraph tool node and tracer, against a scripted Airlock (no server) and langchain-core's
scripted chat model, with LangGraph's in-memory checkpointer."""

import json

import httpx
import pytest
from airlock_sdk.integrations.langgraph import AirlockToolNode, AirlockTracer, decisions
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from tests.sdk.fakes import FakeAirlock, body
from tests.sdk.test_openai_agents import DECIDED, TOOLS, gate


@pytest.fixture(autouse=True)
def _no_sleeping(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)


@pytest.fixture
def fake() -> FakeAirlock:
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": TOOLS}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running", "snapshot": 1}))
    fake.on("POST", "/api/v1/runs/r-1/calls", gate)
    fake.on("POST", "/api/v1/traces/spans", httpx.Response(202, json={"stored": 1}))
    fake.on("GET", "/api/v1/runs/r-1/events", httpx.Response(200, json={"events": DECIDED, "next_cursor": 2}))
    return fake


def graph_of(run, replies):
    model = GenericFakeChatModel(messages=iter(replies))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", AirlockToolNode(run))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda state: "tools" if state["messages"][-1].tool_calls else END)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver(), name="support")


def test_a_turn_is_one_batch_and_a_confirm_interrupts_until_airlocks_decision(fake, tmp_path):
    run = fake.client(tmp_path).start_run(end_user="customer:c-100", task="Orders")
    calls = [
        {"name": "customer__list_orders", "args": {"customer_id": "c-100"}, "id": "call_1", "type": "tool_call"},
        {"name": "support__send_email", "args": {"to": "ada@example.org"}, "id": "call_2", "type": "tool_call"},
    ]
    graph = graph_of(run, [AIMessage(content="", tool_calls=calls), AIMessage(content="Sent after approval.")])
    tracer = AirlockTracer(run)
    config = {"configurable": {"thread_id": "t-1"}, "callbacks": [tracer]}

    state = graph.invoke({"messages": [("user", "Tell the customer about their orders")]}, config)

    [pending] = state["__interrupt__"]
    [approval] = pending.value["approvals"]
    assert (approval["approval_id"], approval["call_id"], approval["skill"]) == (12, "call_2", "support.send_email")
    sent = [[c["call_id"] for c in body(r)["calls"]] for r in fake.sent("POST", "/api/v1/runs/r-1/calls")]
    assert sent == [["call_1", "call_2"]]
    [batch] = fake.sent("POST", "/api/v1/runs/r-1/calls")
    assert body(batch)["exposed_tools"] == ["customer.list_orders", "support.send_email"]  # the node's tools

    state = graph.invoke(Command(resume=decisions(run, pending, timeout=5)), config)

    assert state["messages"][-1].content == "Sent after approval."
    tools = {m.tool_call_id: m for m in state["messages"] if m.type == "tool"}
    assert json.loads(tools["call_1"].content) == {"orders": ["o-5001"]}
    assert json.loads(tools["call_2"].content) == {"status": "sent"}  # the executed outcome, not "pending"
    sent = [[c["call_id"] for c in body(r)["calls"]] for r in fake.sent("POST", "/api/v1/runs/r-1/calls")]
    assert sent == [["call_1", "call_2"], ["call_1", "call_2"]]  # the resumed node re-proposed the same call ids
    tracer.flush()
    spans = [body(r)["spans"][0] for r in fake.sent("POST", "/api/v1/traces/spans")]
    operations = sorted(s["attributes"]["gen_ai.operation.name"] for s in spans)
    assert operations == ["chat", "chat", "invoke_agent", "invoke_agent"]
    interrupted = [s for s in spans if s["attributes"].get("airlock.interrupted")]
    assert len(interrupted) == 1 and interrupted[0]["outcome"] == "ok"  # paused for a person, not failed


def test_the_skills_bind_to_a_langchain_chat_model_by_their_model_names(fake, tmp_path):
    node = AirlockToolNode(fake.client(tmp_path).start_run(end_user="u", task="t"))
    schemas = node.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == ["customer__list_orders", "support__send_email"]
    assert [convert_to_openai_tool(s) for s in schemas] == schemas  # what bind_tools sends, unchanged
    assert schemas[0]["function"]["parameters"]["required"] == ["customer_id"]
    assert node.skills == {"customer__list_orders": "customer.list_orders", "support__send_email": "support.send_email"}


def test_an_interrupt_of_another_node_is_not_airlocks_to_decide(fake, tmp_path):
    run = fake.client(tmp_path).start_run(end_user="u", task="t")
    with pytest.raises(ValueError):
        decisions(run, {"question": "Proceed?"})


def test_the_plain_client_sends_exposed_tools_only_when_they_fit(fake, tmp_path):
    run = fake.client(tmp_path).start_run(end_user="customer:c-100", task="Orders")
    lookup = {"call_id": "c1", "name": "customer.list_orders", "arguments": {"customer_id": "c-1"}}
    run.call([lookup], exposed_tools=["customer.list_orders", "customer.list_orders", "web.search"])
    run.call([lookup | {"call_id": "c2"}], exposed_tools=[f"t{i}" for i in range(201)])
    run.call([lookup | {"call_id": "c3"}])
    first, too_many, none = (body(r) for r in fake.sent("POST", "/api/v1/runs/r-1/calls"))
    assert first["exposed_tools"] == ["customer.list_orders", "web.search"]
    assert "exposed_tools" not in too_many and "exposed_tools" not in none  # Airlock records the callable set
