"""Airlock for LangGraph (`pip install airlock-sdk[langgraph]`).

    from langgraph.types import Command
    from airlock_sdk.integrations.langgraph import AirlockToolNode, AirlockTracer, decisions

    run = airlock.start_run(end_user="u-123", task="Refund order 1182")
    tools = AirlockToolNode(run)                       # the agent's skills
    model = chat_model.bind_tools(tools.tool_schemas())
    graph = builder.add_node("tools", tools)...compile(checkpointer=SqliteSaver(...))
    config = {"configurable": {"thread_id": run.run_id}, "callbacks": [AirlockTracer(run)]}
    state = graph.invoke({"messages": [("user", "Refund order 1182")]}, config)
    for pending in state.get("__interrupt__", []):    # a call waits for a person in Airlock's inbox
        graph.invoke(Command(resume=decisions(run, pending)), config)   # any process, same checkpointer

The tool node sends all tool calls of the model's last message to the gate as one batch (the
model's call ids become Airlock's), so reads overlap and writes run one at a time in the model's
order. When the gate asks a person to confirm, the node calls `interrupt()` with the proposed
actions and their approval ids; `decisions(run, interrupt)` waits on the run's event long poll
for Airlock's decisions and returns the value to resume with, which the node turns into the
tool messages (the executed result, or the decline with its reason). LangGraph re-runs a resumed
node from its start: the batch is proposed again with the same call ids and the gate replays
what it recorded, so nothing runs twice. `AirlockTracer` records the graph (the agent) and each
chat-model turn as GenAI spans on the run's trace.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from airlock_sdk.client import tool_name, tool_skill
from airlock_sdk.integrations.turns import (
    ProposedCall,
    arguments_of,
    render,
    replaced_text,
    send_turn,
    wait_for_outcome,
)
from airlock_sdk.results import ApprovalRequired, Error, Result
from airlock_sdk.run import Run
from airlock_sdk.spans import OpenSpan, SpanRecorder

__all__ = ["AirlockToolNode", "AirlockTracer", "decisions"]

INTERRUPT_KIND = "airlock.approval"


def _outcome(result: Result) -> dict[str, Any]:
    """A call's final result as the model will read it (the resume value is checkpointed as JSON)."""
    return {
        "status": "error" if isinstance(result, Error) else "success",
        "content": render(result),
        **({"error_class": result.error_class} if isinstance(result, Error) else {}),
    }


class AirlockToolNode:
    """A graph node running one model turn's tool calls through Airlock as one batch."""

    def __init__(
        self,
        run: Run,
        definitions: Iterable[Mapping[str, Any]] | None = None,
        *,
        messages_key: str = "messages",
        query: str | None = None,
        limit: int | None = None,
    ) -> None:
        self.run = run
        self.messages_key = messages_key
        self.definitions = list(
            definitions if definitions is not None else run.airlock.tools(format="openai", query=query, limit=limit)
        )
        self.skills = {tool_name(definition): tool_skill(definition) for definition in self.definitions}

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The skills as function schemas any LangChain chat model accepts: `model.bind_tools(node.tool_schemas())`."""
        schemas = []
        for definition in self.definitions:
            function = definition.get("function") if isinstance(definition.get("function"), Mapping) else definition
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": tool_name(definition),
                        "description": str(function.get("description", "")),
                        "parameters": dict(function.get("parameters") or {"type": "object", "properties": {}}),
                    },
                }
            )
        return schemas

    def _skill(self, name: str) -> str:
        return self.skills.get(name, name.replace("__", "."))  # OpenAI-format names turn dots into "__"

    def __call__(self, state: Mapping[str, Any]) -> dict[str, list[ToolMessage]]:
        message = state[self.messages_key][-1]
        tool_calls = list(getattr(message, "tool_calls", None) or [])
        calls = [ProposedCall(str(tc["id"]), self._skill(tc["name"]), arguments_of(tc["args"])) for tc in tool_calls]
        results = send_turn(self.run, calls, exposed_tools=list(self.skills.values()))
        pending = [(call, results[call.call_id]) for call in calls]
        pending = [(call, result) for call, result in pending if isinstance(result, ApprovalRequired)]
        outcomes: dict[str, dict] = {}
        if pending:
            resumed = interrupt(
                {
                    "kind": INTERRUPT_KIND,
                    "run_id": self.run.run_id,
                    "approvals": [
                        {
                            "approval_id": result.approval_id,
                            "call_id": call.call_id,
                            "skill": call.skill,
                            "arguments": call.arguments,
                            "proposed_action": result.proposed_action,
                            "reason": result.reason,
                            "expires_at": result.expires_at,
                        }
                        for call, result in pending
                        if isinstance(result, ApprovalRequired)
                    ],
                }
            )
            outcomes = dict((resumed or {}).get("outcomes") or {}) if isinstance(resumed, Mapping) else {}
        messages = []
        for tc, call in zip(tool_calls, calls, strict=True):
            outcome = outcomes.get(call.call_id) or _outcome(results[call.call_id])
            messages.append(
                ToolMessage(
                    content=outcome["content"],
                    tool_call_id=call.call_id,
                    name=tc["name"],
                    status="error" if outcome.get("status") == "error" else "success",
                )
            )
        return {self.messages_key: [*messages, *self._summarised(state[self.messages_key])]}

    def _summarised(self, history: Iterable[Any]) -> list[ToolMessage]:
        """Earlier tool messages the run's context budget replaced, as their summaries: with the same message
        id, so that LangGraph's `add_messages` reducer puts each in place of the full result."""
        swapped = []
        for old in history:
            text = replaced_text(self.run, getattr(old, "tool_call_id", None)) if isinstance(old, ToolMessage) else None
            if text is not None and old.id and old.content != text:
                swapped.append(
                    ToolMessage(
                        content=text, tool_call_id=old.tool_call_id, name=old.name, id=old.id, status=old.status
                    )
                )
        return swapped


def decisions(run: Run, pending: Any, *, timeout: float = 600) -> dict[str, Any]:
    """Wait for Airlock's decision on each approval of an AirlockToolNode interrupt (the Interrupt or
    its value) and return what to resume with: `Command(resume=decisions(run, pending))`.
    Raises ApprovalTimeout while a person has not decided."""
    value = getattr(pending, "value", pending)
    if not isinstance(value, Mapping) or value.get("kind") != INTERRUPT_KIND:
        raise ValueError("This interrupt does not come from an AirlockToolNode.")
    outcomes = {}
    for approval in value["approvals"]:
        call = ProposedCall(approval["call_id"], approval["skill"], dict(approval.get("arguments") or {}))
        known = ApprovalRequired(call_id=call.call_id, approval_id=int(approval["approval_id"]))
        outcomes[call.call_id] = _outcome(wait_for_outcome(run, call, known, timeout=timeout))
    return {"outcomes": outcomes}


class AirlockTracer(BaseCallbackHandler):
    """LangChain callbacks that record the graph run (`invoke_agent`) and each chat-model turn
    (`chat`) as GenAI spans on the Airlock run's trace: pass it in the graph's config callbacks."""

    raise_error = False  # tracing never fails the graph

    def __init__(self, run: Run, *, agent_name: str | None = None) -> None:
        self.recorder = SpanRecorder(run)
        self.agent_name = agent_name
        self._open: dict[uuid.UUID, OpenSpan] = {}
        self._parents: dict[uuid.UUID, uuid.UUID | None] = {}
        self._lock = threading.Lock()

    def _span_above(self, parent_run_id: uuid.UUID | None) -> OpenSpan | None:
        with self._lock:
            while parent_run_id is not None:
                if parent_run_id in self._open:
                    return self._open[parent_run_id]
                parent_run_id = self._parents.get(parent_run_id)
        return None

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs: Any) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        if parent_run_id is None:
            name = self.agent_name or kwargs.get("name") or (serialized or {}).get("name") or "graph"
            span = self.recorder.start("invoke_agent", f"invoke_agent {name}", **{"gen_ai.agent.name": name})
            with self._lock:
                self._open[run_id] = span

    def on_chain_end(self, outputs, *, run_id, **kwargs: Any) -> None:
        self._end(run_id)

    def on_chain_error(self, error, *, run_id, **kwargs: Any) -> None:
        if isinstance(error, GraphInterrupt):  # a node paused for a person: the graph ends normally, paused
            agent_span = self._span_above(run_id)
            if agent_span is not None:
                agent_span.set(**{"airlock.interrupted": True})
            self._end(run_id)
        else:
            self._end(run_id, error)

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kwargs: Any) -> None:
        params = kwargs.get("invocation_params") or {}
        label = str(params.get("model") or params.get("model_name") or (serialized or {}).get("name") or "chat_model")
        with self._lock:
            self._parents[run_id] = parent_run_id
        span = self.recorder.start(
            "chat", f"chat {label}", parent=self._span_above(parent_run_id), **{"gen_ai.request.model": label}
        )
        with self._lock:
            self._open[run_id] = span

    def on_llm_end(self, response: LLMResult, *, run_id, **kwargs: Any) -> None:
        with self._lock:
            span = self._open.get(run_id)
        if span is not None:
            generations = [g for batch in response.generations for g in batch]
            message = getattr(generations[0], "message", None) if generations else None
            usage = getattr(message, "usage_metadata", None) or {}
            span.set(
                **{
                    "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                    "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                    "gen_ai.response.tool_calls": [tc["id"] for tc in getattr(message, "tool_calls", None) or []],
                }
            )
        self._end(run_id)

    def on_llm_error(self, error, *, run_id, **kwargs: Any) -> None:
        self._end(run_id, error)

    def _end(self, run_id: uuid.UUID, error: BaseException | None = None) -> None:
        with self._lock:
            span = self._open.pop(run_id, None)
        if span is not None:
            self.recorder.end(span, error)
            if span.operation == "invoke_agent":
                self.recorder.flush()

    def flush(self, timeout: float = 10) -> None:
        self.recorder.flush(timeout)
