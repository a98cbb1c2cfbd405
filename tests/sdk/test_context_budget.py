"""Issue 39, part 3, as the model meets it through the SDK's integrations: once a run's tool results pass
its context budget, the oldest is replaced, in the history each framework hands its model, by the summary
and ref the gate gave; describe_result(ref) brings it back. A live Airlock, the SDK over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from agents import Agent, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from airlock_sdk import Airlock, ClientSkillRegistry, Ok
from airlock_sdk.integrations.openai_agents import AirlockAgents
from langchain_core.messages import AIMessage

from console.services import create_agent
from lib import tokens
from registry.snapshots import publish_snapshot
from runs.adapters.python import register
from tests.runs.factories import grant, make_skill
from tests.sdk.langgraph_resume import build_graph, config_for, tool_outputs


def ledger_rows(account: str) -> dict:
    return {"account": account, "rows": [{"entry": f"{account}-{i}", "amount": i * 10} for i in range(40)]}


@register("ctxtest.ledger", effect="read")
def ledger(*, arguments, context):
    return ledger_rows(arguments.get("account", "a-1"))


# A budget one and a half results wide: the second result pushes the first out.
BUDGET = int(1.5 * tokens.count(tokens.as_model_text(ledger_rows("a-1"))))


@pytest.fixture
def airlock(asgi_live_server, acme, tmp_path) -> Iterator[Airlock]:
    make_skill("books.ledger", adapter="python:ctxtest.ledger", result_limit_bytes=65536, publish=False)
    grant(acme, "books.*")
    publish_snapshot(reason="context budget tests")
    key = create_agent(tenant=acme, name="support-bot", role="support")[1]
    client = Airlock(asgi_live_server.url, key, cache_dir=tmp_path, client_skills=ClientSkillRegistry())
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _no_openai_tracing():
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _read(account: str, call_id: str):
    return function_call("books__ledger", {"account": account}, call_id=call_id)


async def test_openai_agents_the_model_is_given_the_summary_of_a_replaced_result(airlock):
    run = airlock.start_run(end_user="u-1", task="Reconcile the books", model="gpt-4o", context_budget=BUDGET)
    airlock_agents = AirlockAgents(run)
    model = ScriptedModel(
        [[_read("a-1", "read-1")], [_read("a-2", "read-2")], [assistant_message("The books balance.")]]
    )
    agent = Agent(name="books", model=airlock_agents.model(model), tools=airlock_agents.tools())

    result = await airlock_agents.invoke(agent, "Reconcile the books")

    assert result.final_output == "The books balance."
    outputs = {
        item["call_id"]: item["output"]
        for item in model.calls[-1].input  # what the model was given on its last turn
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    summary = json.loads(outputs["read-1"])
    assert summary["summary"].startswith("The result of books.ledger (call read-1: an object with rows (40 items)")
    assert json.loads(outputs["read-2"])["account"] == "a-2"  # the newest stays whole
    [described] = run.call([{"name": "describe_result", "arguments": {"ref": summary["ref"]}}])
    assert isinstance(described, Ok) and described.content["content"] == ledger_rows("a-1")


def test_langgraph_the_replaced_tool_message_becomes_its_summary(airlock, tmp_path):
    run = airlock.start_run(end_user="u-1", task="Reconcile the books", context_budget=BUDGET)
    replies = [
        AIMessage(content="", tool_calls=[{"name": "books__ledger", "args": {"account": f"a-{i}"}, "id": f"read-{i}"}])
        for i in (1, 2)
    ] + [AIMessage(content="The books balance.")]
    graph = build_graph(run, replies, str(tmp_path / "checkpoints.sqlite"))
    config = config_for(run)

    state = graph.invoke({"messages": [("user", "Reconcile the books")]}, config)

    outputs = tool_outputs(state["messages"])
    assert list(outputs) == ["read-1", "read-2"]  # replaced in place, not appended
    assert json.loads(outputs["read-1"]["content"]) == run.context_replaced["read-1"]
    assert json.loads(outputs["read-2"]["content"])["account"] == "a-2"
    config["callbacks"][0].flush()
