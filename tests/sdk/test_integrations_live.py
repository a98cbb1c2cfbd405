"""The framework adapters against a live Airlock (uvicorn on loopback, a Celery worker when
PostgreSQL and Redis are configured): one batch per model turn, writes downstream one after the
other in the model's order, confirm verdicts as the framework's own interruption, decided by a
person through the approver API, and resumed in a fresh process from the serialised state."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from agents import Agent, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from airlock_sdk import Airlock, ClientSkillRegistry, NotFound
from airlock_sdk.integrations.langgraph import decisions
from airlock_sdk.integrations.openai_agents import AirlockAgents
from airlock_sdk.integrations.turns import ProposedCall, wait_for_outcome
from airlock_sdk.run import Run
from airlock_sdk.spans import SpanRecorder
from django.conf import settings
from langchain_core.messages import AIMessage
from langgraph.types import Command

from console.services import create_agent
from tests.sdk.langgraph_resume import build_graph, config_for, tool_outputs
from tests.sdk.model_view import fenced
from traces.models import Span

# Several clients write at once (the agent, its span sender, the person, the worker): a real database and broker.
pytestmark = [pytest.mark.postgres, pytest.mark.redis]

AGENT = "support"


class Batches:
    """The batches the agent's client sent, read off its own HTTP client."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path.endswith("/calls"):
            self.sent.append([c["call_id"] for c in json.loads(request.content)["calls"]])


@pytest.fixture
def batches() -> Batches:
    return Batches()


@pytest.fixture
def airlock(asgi_live_server, desk_catalog, agent_and_key, celery_worker, batches, tmp_path):
    client = Airlock(
        asgi_live_server.url,
        agent_and_key[1],
        cache_dir=tmp_path,
        client_skills=ClientSkillRegistry(),
        http_client=httpx.Client(timeout=60, event_hooks={"request": [batches]}),
    )
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _no_openai_tracing():
    set_tracing_disabled(True)  # the framework's own exporter would call OpenAI's servers
    yield
    set_tracing_disabled(False)


def outputs_of(model: ScriptedModel) -> dict[str, str]:
    items = model.calls[-1].input
    return {i["call_id"]: i["output"] for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"}


def assert_one_after_the_other(writes: list[dict], entries: list[str]) -> None:
    assert [w["body"]["entry"] for w in writes] == entries  # the model's order
    for earlier, later in zip(writes, writes[1:], strict=False):
        assert earlier["answered"] <= later["arrived"], "two writes of one turn overlapped downstream"


# --- OpenAI Agents SDK ---------------------------------------------------------------------------


async def test_openai_agents_one_turn_is_one_batch_and_its_writes_run_in_the_models_order(airlock, downstream):
    run = airlock.start_run(end_user="customer:c-100", task="Book the two ledger entries")
    airlock_agents = AirlockAgents(run)
    model = ScriptedModel(
        [
            [
                function_call("ledger__post_entry", {"entry": "first"}, call_id="w1"),
                function_call("desk__read_ticket", {"customer_id": "c-100"}, call_id="r1"),
                function_call("ledger__post_entry", {"entry": "second"}, call_id="w2"),
            ],
            [assistant_message("Both entries are booked.")],
        ]
    )
    agent = Agent(name=AGENT, model=airlock_agents.model(model), tools=airlock_agents.tools())

    result = await airlock_agents.invoke(agent, "Book the two ledger entries")

    assert result.final_output == "Both entries are booked." and not result.interruptions
    assert batches_of(airlock) == [["w1", "r1", "w2"]]  # the whole turn, once
    assert_one_after_the_other(downstream.to("/write"), ["first", "second"])
    outputs = outputs_of(model)
    assert fenced(outputs["w1"]).json()["received"] == {"entry": "first"}
    assert fenced(outputs["r1"]).json()["done"] == "read"
    assert_turns_traced(run.run_id, turns=2, first_calls=["w1", "r1", "w2"])


def assert_turns_traced(run_id: str, *, turns: int, first_calls: list[str], agent: str = AGENT) -> None:
    """The model turns and the agent are GenAI spans on the run's own trace, the turns under the agent."""
    spans = list(Span.objects.filter(trace__run_id=run_id))
    [agent_span] = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    assert agent_span.attributes["gen_ai.agent.name"] == agent
    chats = sorted((s for s in spans if s.kind == "model_turn"), key=lambda s: s.started_at)
    assert len(chats) == turns
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat" and chat.parent_span_id == agent_span.span_id
    assert chats[0].attributes["gen_ai.response.tool_calls"] == first_calls


def batches_of(airlock: Airlock) -> list[list[str]]:
    hooks = airlock.transport.client.event_hooks["request"]
    return next(h for h in hooks if isinstance(h, Batches)).sent


async def test_openai_agents_confirm_is_an_interruption_resumed_in_a_fresh_process_after_the_person_approves(
    airlock, downstream, person, asgi_live_server, agent_and_key, celery_worker, tmp_path
):
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer")
    airlock_agents = AirlockAgents(run)
    model = ScriptedModel(
        [[function_call("mail__send_notice", {"to": "ada@example.org", "text": "Refund booked."}, call_id="n1")]]
    )
    agent = Agent(name=AGENT, model=airlock_agents.model(model), tools=airlock_agents.tools())

    result = await airlock_agents.invoke(agent, "Tell the customer")

    [interruption] = result.interruptions  # the SDK's own human-in-the-loop stop, not a blocked tool
    assert interruption.raw_item.call_id == "n1"
    assert downstream.to("/send") == []  # nothing sent before a person decides
    saved = result.to_state().to_string()

    job = {
        "url": asgi_live_server.url,
        "key": agent_and_key[1],
        "cache_dir": str(tmp_path / "fresh"),
        "run_id": run.run_id,
        "state": saved,
        "agent": AGENT,
        "final_message": "The notice is sent.",
    }
    deciding = person.decide_later("approve", delay=1.5)  # while the fresh process waits on the long poll
    resumed = subprocess.run(
        [sys.executable, "-m", "tests.sdk.agents_resume"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=90,
        cwd=settings.BASE_DIR,
    )
    deciding.join()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    outcome = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert outcome["final_output"] == "The notice is sent." and outcome["interruptions"] == 0
    assert fenced(outcome["outputs"]["n1"]).json()["received"] == {"to": "ada@example.org", "text": "Refund booked."}
    assert [r["body"]["to"] for r in downstream.to("/send")] == ["ada@example.org"]  # executed once
    assert_executed_by_the_worker(celery_worker)


def assert_executed_by_the_worker(log) -> None:
    if log is not None:  # with PostgreSQL and Redis: the approved call ran in the Celery worker process
        assert "approvals.tasks.resume_call" in log.read_text()


async def test_openai_agents_a_declined_call_resumes_with_the_reason_for_the_model(airlock, downstream, person):
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer")
    airlock_agents = AirlockAgents(run)
    model = ScriptedModel(
        [
            [function_call("mail__send_notice", {"to": "eve@example.org", "text": "Hi"}, call_id="n1")],
            [assistant_message("I could not send it.")],
        ]
    )
    agent = Agent(name=AGENT, model=airlock_agents.model(model), tools=airlock_agents.tools())
    result = await airlock_agents.invoke(agent, "Tell the customer")
    assert result.interruptions

    deciding = person.decide_later("decline", delay=0.5, reason="wrong recipient")
    state = await airlock_agents.resolve(await RunState.from_string(agent, result.to_state().to_string()))
    deciding.join()
    result = await airlock_agents.invoke(agent, state)

    assert result.final_output == "I could not send it."
    error = json.loads(outputs_of(model)["n1"])["error"]
    assert error["class"] == "declined"
    assert downstream.to("/send") == []


# --- LangGraph -----------------------------------------------------------------------------------


def tool_call(name: str, args: dict, call_id: str) -> dict:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def test_langgraph_one_turn_is_one_batch_and_its_writes_run_in_the_models_order(airlock, downstream, tmp_path):
    run = airlock.start_run(end_user="customer:c-100", task="Book the two ledger entries")
    replies = [
        AIMessage(
            content="",
            tool_calls=[
                tool_call("ledger__post_entry", {"entry": "first"}, "w1"),
                tool_call("desk__read_ticket", {"customer_id": "c-100"}, "r1"),
                tool_call("ledger__post_entry", {"entry": "second"}, "w2"),
            ],
        ),
        AIMessage(content="Both entries are booked."),
    ]
    graph = build_graph(run, replies, str(tmp_path / "checkpoints.sqlite"))
    config = config_for(run)

    state = graph.invoke({"messages": [("user", "Book the two ledger entries")]}, config)

    assert state["messages"][-1].content == "Both entries are booked."
    assert batches_of(airlock) == [["w1", "r1", "w2"]]
    assert_one_after_the_other(downstream.to("/write"), ["first", "second"])
    outputs = tool_outputs(state["messages"])
    assert fenced(outputs["w2"]["content"]).json()["received"] == {"entry": "second"}
    config["callbacks"][0].flush()
    assert_turns_traced(run.run_id, turns=2, first_calls=["w1", "r1", "w2"], agent="support")


def test_langgraph_confirm_interrupts_and_resumes_from_the_checkpoint_in_another_process(
    airlock, downstream, person, asgi_live_server, agent_and_key, celery_worker, tmp_path
):
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer")
    checkpoint = str(tmp_path / "checkpoints.sqlite")
    replies = [
        AIMessage(
            content="",
            tool_calls=[
                tool_call("desk__read_ticket", {"customer_id": "c-100"}, "r1"),
                tool_call("mail__send_notice", {"to": "ada@example.org", "text": "Refund booked."}, "n1"),
            ],
        )
    ]
    graph = build_graph(run, replies, checkpoint)

    state = graph.invoke({"messages": [("user", "Tell the customer")]}, config_for(run))

    [pending] = state["__interrupt__"]
    [approval] = pending.value["approvals"]  # the proposed action and the approval id, for the developer's UI
    assert approval["call_id"] == "n1" and approval["skill"] == "mail.send_notice"
    assert approval["proposed_action"]["arguments"] == {"to": "ada@example.org", "text": "Refund booked."}
    assert downstream.to("/send") == []
    [listed] = person.pending()
    assert listed["id"] == approval["approval_id"]

    job = {
        "url": asgi_live_server.url,
        "key": agent_and_key[1],
        "cache_dir": str(tmp_path / "fresh"),
        "run_id": run.run_id,
        "checkpoint": checkpoint,
        "final_message": "The notice is sent.",
    }
    deciding = person.decide_later("approve", delay=1.5)
    resumed = subprocess.run(
        [sys.executable, "-m", "tests.sdk.langgraph_resume"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=90,
        cwd=settings.BASE_DIR,
    )
    deciding.join()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    outcome = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert outcome["final"] == "The notice is sent." and outcome["interrupts"] == 0
    assert fenced(outcome["tools"]["n1"]["content"]).json()["received"]["to"] == "ada@example.org"
    assert fenced(outcome["tools"]["r1"]["content"]).json()["done"] == "read"
    assert len(downstream.to("/send")) == 1 and len(downstream.to("/read")) == 1  # the resumed node ran nothing twice
    assert_executed_by_the_worker(celery_worker)


def test_langgraph_a_declined_call_resumes_with_the_reason(airlock, downstream, person, tmp_path):
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer")
    replies = [
        AIMessage(
            content="", tool_calls=[tool_call("mail__send_notice", {"to": "eve@example.org", "text": "Hi"}, "n1")]
        ),
        AIMessage(content="I could not send it."),
    ]
    graph = build_graph(run, replies, str(tmp_path / "checkpoints.sqlite"))
    config = config_for(run)
    [pending] = graph.invoke({"messages": [("user", "Tell the customer")]}, config)["__interrupt__"]

    person.decide_next("decline", reason="wrong recipient")
    state = graph.invoke(Command(resume=decisions(run, pending, timeout=30)), config)

    assert state["messages"][-1].content == "I could not send it."
    output = tool_outputs(state["messages"])["n1"]
    assert output["status"] == "error" and json.loads(output["content"])["error"]["class"] == "declined"
    assert downstream.to("/send") == []


# --- isolation -----------------------------------------------------------------------------------


def test_another_tenants_agent_can_neither_resume_the_run_nor_add_to_its_trace(
    airlock, asgi_live_server, person, globex, tmp_path
):
    run = airlock.start_run(end_user="customer:c-100", task="Tell the customer")
    [pending] = run.call([{"call_id": "n1", "name": "mail.send_notice", "arguments": {"to": "a@b.c", "text": "x"}}])
    _, key = create_agent(tenant=globex, name="globex-bot", role="support")
    outsider = Airlock(asgi_live_server.url, key, cache_dir=tmp_path / "outsider", client_skills=ClientSkillRegistry())

    with pytest.raises(NotFound):
        outsider.get_run(run.run_id)
    forged = Run(outsider, {"run_id": run.run_id, "trace_id": run.trace_id})
    with pytest.raises(NotFound):  # re-proposing the call to learn its approval: not its run
        wait_for_outcome(forged, ProposedCall("n1", "mail.send_notice", {"to": "a@b.c", "text": "x"}), None, timeout=1)
    recorder = SpanRecorder(forged)
    with recorder.span("chat", "chat forged-turn"):
        pass
    recorder.flush()
    # Not on acme's run: the ingest keeps it in the sender's own tenant, on a trace of its own.
    assert not Span.objects.filter(trace__run_id=run.run_id, name="chat forged-turn").exists()
    assert {s.trace.tenant_id for s in Span.objects.filter(name="chat forged-turn")} <= {globex.pk}
    assert [a["id"] for a in person.pending()] == [pending.approval_id]  # acme's inbox, untouched
