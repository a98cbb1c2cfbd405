"""Airlock for the OpenAI Agents SDK (`pip install airlock-sdk[openai-agents]`).

    from agents import Agent, RunState
    from airlock_sdk.integrations.openai_agents import AirlockAgents

    run = airlock.start_run(end_user="u-123", task="Refund order 1182")
    airlock_agents = AirlockAgents(run)
    agent = Agent(name="support", model=airlock_agents.model(my_model), tools=airlock_agents.tools())
    result = await airlock_agents.invoke(agent, "Refund order 1182 and tell the customer")
    if result.interruptions:                      # a call waits for a person in Airlock's inbox
        saved = result.to_state().to_string()     # keep it anywhere; resume in any process:
        state = await RunState.from_string(agent, saved)
        state = await airlock_agents.resolve(state)   # waits for the decision, approves or rejects
        result = await airlock_agents.invoke(agent, state)

The model wrapper sends all tool calls of one model turn to the gate as one batch (the model's
call ids become Airlock's), so reads overlap and writes run one at a time in the model's order.
A confirm verdict becomes the SDK's own interruption (`needs_approval`), so the run stops with a
serialisable state instead of holding a tool call open; `resolve` waits on the run's event long
poll for Airlock's decision and approves the interruption with the executed result, or rejects
it with the decline reason as the message the model reads. Model turns and the agent are
recorded as GenAI spans on the run's trace. Errors reach the model as JSON with their class.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, RunResult, RunState
from agents.models.multi_provider import MultiProvider
from agents.run_context import RunContextWrapper
from agents.tool_context import ToolContext

from airlock_sdk.client import tool_skill
from airlock_sdk.integrations.turns import (
    ProposedCall,
    arguments_of,
    is_refusal,
    render,
    replaced_text,
    send_turn,
    wait_for_outcome,
)
from airlock_sdk.results import ApprovalRequired, Result
from airlock_sdk.run import Run
from airlock_sdk.spans import SpanRecorder

_MODEL_NAME = re.compile(r"[^a-zA-Z0-9_-]")

__all__ = ["AirlockAgents", "AirlockModel", "model_name", "render"]


def model_name(skill: str) -> str:
    """OpenAI tool names allow letters, digits, _ and - only (at most 64)."""
    return _MODEL_NAME.sub("__", skill)[:64]


def _turn_tools(args: tuple, kwargs: dict) -> list[Any] | None:
    """The `tools` argument of Model.get_response / stream_response (the fourth), as the model got them."""
    tools = kwargs["tools"] if "tools" in kwargs else (args[3] if len(args) > 3 else None)
    return list(tools) if tools is not None else None


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


class AirlockAgents:
    """Airlock's gate, approvals and trace for one run, in the OpenAI Agents SDK's terms."""

    def __init__(self, run: Run, *, approval_timeout: float = 600) -> None:
        self.run = run
        self.approval_timeout = approval_timeout
        self.spans = SpanRecorder(run)
        self.skills: dict[str, str] = {}  # model-facing tool name -> Airlock skill
        self.results: dict[str, Result] = {}  # call id -> the gate's answer (or, once decided, the outcome)

    # what the developer wires in ------------------------------------------------------------
    def tools(
        self, *, query: str | None = None, limit: int | None = None, definitions: Iterable[Mapping] | None = None
    ) -> list[FunctionTool]:
        """The agent's Airlock skills as FunctionTools (discovered with `query` when given)."""
        if definitions is None:
            definitions = self.run.airlock.tools(format="openai", query=query, limit=limit)
        tools = []
        for definition in definitions:
            function = definition.get("function") if isinstance(definition.get("function"), Mapping) else definition
            skill = tool_skill(definition)
            name = model_name(str(function.get("name") or skill))
            self.skills[name] = skill
            tools.append(
                FunctionTool(
                    name=name,
                    description=str(function.get("description", "")),
                    params_json_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
                    on_invoke_tool=self._invoker(skill),
                    needs_approval=self._approval_check(skill),
                    strict_json_schema=False,  # the gate validates Airlock's schemas; strict mode would rewrite them
                )
            )
        return tools

    def model(self, model: Model | str) -> AirlockModel:
        """Wrap the agent's model so each turn's tool calls reach the gate as one batch, traced."""
        return AirlockModel(MultiProvider().get_model(model) if isinstance(model, str) else model, self)

    async def invoke(self, agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """`Runner.run` inside the agent's span on the run's trace (input: text, items or a RunState)."""
        with self.spans.span("invoke_agent", f"invoke_agent {agent.name}", **{"gen_ai.agent.name": agent.name}) as span:
            result = await Runner.run(agent, input, **kwargs)
            span.set(**{"airlock.interruptions": len(result.interruptions)})
        await asyncio.to_thread(self.spans.flush)
        return result

    async def resolve(self, state: RunState[Any, Any], *, timeout: float | None = None) -> RunState[Any, Any]:
        """Wait for Airlock's decision on each of the state's Airlock interruptions, then approve it (the
        tool hands the model the executed result) or reject it with the reason the model reads.
        Raises ApprovalTimeout while a person has not decided; the state is unchanged for that call."""
        for item in state.get_interruptions():
            call = self._proposed(item.raw_item, item.tool_name)
            if call is None:
                continue  # another tool's approval: the developer decides it
            outcome = await asyncio.to_thread(
                wait_for_outcome,
                self.run,
                call,
                self.results.get(call.call_id),
                timeout=self.approval_timeout if timeout is None else timeout,
            )
            self.results[call.call_id] = outcome
            if is_refusal(outcome):
                state.reject(item, rejection_message=render(outcome))
            else:
                state.approve(item)
        return state

    # the turn -------------------------------------------------------------------------------
    def _proposed(self, raw_item: Any, tool_name: str | None = None) -> ProposedCall | None:
        if _field(raw_item, "type") not in (None, "function_call"):
            return None
        skill = self.skills.get(str(tool_name or _field(raw_item, "name") or ""))
        call_id = _field(raw_item, "call_id")
        if skill is None or not call_id:
            return None
        return ProposedCall(str(call_id), skill, arguments_of(_field(raw_item, "arguments")))

    async def gate_turn(self, output: Iterable[Any], tools: Iterable[Any] | None = None) -> None:
        """Send the turn's Airlock calls not answered yet as one batch, with the names of the tools the
        model was shown this turn (its Airlock tools by their skill names)."""
        calls = [call for item in output if (call := self._proposed(item)) and call.call_id not in self.results]
        exposed = None
        if tools is not None:
            names = [str(getattr(tool, "name", "")) for tool in tools]
            exposed = [self.skills.get(name, name) for name in names if name]
        self.results.update(await asyncio.to_thread(send_turn, self.run, calls, exposed))

    async def _result(self, call: ProposedCall) -> Result:
        if call.call_id not in self.results:  # the model was not wrapped: this call is a batch of its own
            self.results.update(await asyncio.to_thread(send_turn, self.run, [call]))
        return self.results[call.call_id]

    def _approval_check(self, skill: str):
        async def needs_approval(context: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            """A confirm verdict is the SDK's interruption: the run stops with a state to resume."""
            return isinstance(await self._result(ProposedCall(call_id, skill, params)), ApprovalRequired)

        return needs_approval

    def _invoker(self, skill: str):
        async def invoke(context: ToolContext[Any], arguments_json: str) -> str:
            call = ProposedCall(context.tool_call_id, skill, arguments_of(arguments_json))
            result = await self._result(call)
            if isinstance(result, ApprovalRequired):  # approved in the SDK before Airlock decided: wait for Airlock
                result = await asyncio.to_thread(
                    wait_for_outcome, self.run, call, result, timeout=self.approval_timeout
                )
                self.results[call.call_id] = result
            return render(result)

        return invoke


def _summarised(run: Run, items: Any) -> Any:
    """Input items with the output of each call the run's context budget replaced swapped for its summary."""
    if not isinstance(items, list):
        return items
    swapped = []
    for item in items:
        if isinstance(item, Mapping) and item.get("type") == "function_call_output":
            text = replaced_text(run, item.get("call_id"))
            item = {**item, "output": text} if text is not None else item
        swapped.append(item)
    return swapped


class AirlockModel(Model):
    """The developer's model, with each turn traced as a GenAI `chat` span and its tool calls gated
    as one batch before the SDK runs (or interrupts for) any of them."""

    def __init__(self, inner: Model, airlock_agents: AirlockAgents) -> None:
        self.inner = inner
        self.airlock_agents = airlock_agents

    def _model_label(self) -> str:
        return str(getattr(self.inner, "model", "") or type(self.inner).__name__)

    def _turn_attributes(self, label: str) -> dict[str, Any]:
        attributes = {"gen_ai.request.model": label}
        if type(self.inner).__module__.startswith("agents.models.openai"):  # the SDK's own OpenAI models
            attributes["gen_ai.provider.name"] = "openai"
        return attributes

    def _with_summaries(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The turn's input with each result the run's context budget replaced given as its summary."""
        run = self.airlock_agents.run
        if not run.context_replaced:
            return args, kwargs
        if "input" in kwargs:
            return args, {**kwargs, "input": _summarised(run, kwargs["input"])}
        if len(args) > 1:
            return (args[0], _summarised(run, args[1]), *args[2:]), kwargs
        return args, kwargs

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        args, kwargs = self._with_summaries(args, kwargs)
        label = self._model_label()
        with self.airlock_agents.spans.span("chat", f"chat {label}", **self._turn_attributes(label)) as span:
            response = await self.inner.get_response(*args, **kwargs)
            usage = response.usage
            span.set(
                **{
                    "gen_ai.response.id": response.response_id,
                    "gen_ai.usage.input_tokens": usage.input_tokens if usage else None,
                    "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
                    "gen_ai.response.tool_calls": [
                        c for item in response.output if (c := _field(item, "call_id")) is not None
                    ],
                }
            )
        await self.airlock_agents.gate_turn(response.output, _turn_tools(args, kwargs))
        return response

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Streamed turns pass through as they come; their Airlock calls are gated once the turn is complete."""
        args, kwargs = self._with_summaries(args, kwargs)
        label = self._model_label()
        with self.airlock_agents.spans.span("chat", f"chat {label}", **self._turn_attributes(label)):
            async for event in self.inner.stream_response(*args, **kwargs):
                if getattr(event, "type", "") == "response.completed":
                    await self.airlock_agents.gate_turn(event.response.output, _turn_tools(args, kwargs))
                yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()
