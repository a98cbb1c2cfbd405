"""Airlock tools for the OpenAI Agents SDK (`pip install openai-agents`).

    from agents import Agent, Runner
    from airlock_sdk.integrations.openai_agents import airlock_function_tools

    run = airlock.start_run(end_user="u-123", task="Refund order 1182")
    agent = Agent(name="support", tools=airlock_function_tools(airlock, run))
    await Runner.run(agent, "Refund order 1182 and tell the customer")

Every tool call the model makes goes through the gate as a one-call batch (the model's call id
becomes the Airlock call id). A call that needs confirmation appears in Airlock's inbox; the
tool waits for the decision (up to `approval_timeout`) and hands the model the outcome.
Errors are returned to the model as JSON with their class, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from airlock_sdk.client import Airlock, tool_skill
from airlock_sdk.errors import AirlockError, ApprovalTimeout
from airlock_sdk.results import ApprovalRequired, Error, Ok, Result
from airlock_sdk.run import Run

_MODEL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def model_name(skill: str) -> str:
    """OpenAI tool names allow letters, digits, _ and - only (at most 64)."""
    return _MODEL_NAME.sub("__", skill)[:64]


def render(result: Result, *, waited: bool = False) -> str:
    """What the model reads back: the content, or the error with its class."""
    if isinstance(result, Ok):
        return result.content if isinstance(result.content, str) else json.dumps(result.content, default=str)
    if isinstance(result, ApprovalRequired):
        return json.dumps(
            {
                "status": "approval_pending",
                "approval_id": result.approval_id,
                "message": "A person must approve this action in Airlock; it has not been decided yet. "
                "Do not retry it; tell the user it is waiting for approval.",
            }
        )
    assert isinstance(result, Error)
    error: dict[str, Any] = {"class": result.error_class, "code": result.code, "message": result.message}
    if result.retry_after is not None:
        error["retry_after"] = result.retry_after
    if result.fields:
        error["fields"] = result.fields
    return json.dumps({"error": error})


class AirlockTool:
    """The invoke side of one FunctionTool: one skill, one run."""

    def __init__(self, run: Run, skill: str, *, wait_for_approvals: bool, approval_timeout: float) -> None:
        self.run = run
        self.skill = skill
        self.wait_for_approvals = wait_for_approvals
        self.approval_timeout = approval_timeout

    def invoke(self, arguments_json: str, call_id: str) -> str:
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            return json.dumps({"error": {"class": "validation", "message": "The arguments are not valid JSON."}})
        try:
            [result] = self.run.call([{"call_id": call_id, "name": self.skill, "arguments": arguments}])
            if isinstance(result, ApprovalRequired) and self.wait_for_approvals:
                with contextlib.suppress(ApprovalTimeout):  # still pending: the model is told so
                    result = self.run.wait(result.approval_id, timeout=self.approval_timeout)
            return render(result)
        except AirlockError as exc:  # transport failures: tell the model, do not crash its run
            return json.dumps({"error": {"class": "unavailable", "message": f"Airlock could not be reached: {exc}"}})

    async def __call__(self, context: ToolContext[Any], arguments_json: str) -> str:
        return await asyncio.to_thread(self.invoke, arguments_json, context.tool_call_id)


def function_tools_from_definitions(
    definitions: Iterable[Mapping[str, Any]],
    run: Run,
    *,
    wait_for_approvals: bool = True,
    approval_timeout: float = 600,
) -> list[FunctionTool]:
    """FunctionTools from OpenAI-format definitions (as `Airlock.tools(format="openai")` returns them)."""
    tools = []
    for definition in definitions:
        function = definition.get("function") if isinstance(definition.get("function"), Mapping) else definition
        skill = tool_skill(definition)
        tools.append(
            FunctionTool(
                name=model_name(str(function.get("name") or skill)),
                description=str(function.get("description", "")),
                params_json_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
                on_invoke_tool=AirlockTool(
                    run, skill, wait_for_approvals=wait_for_approvals, approval_timeout=approval_timeout
                ),
                strict_json_schema=False,  # Airlock's schemas are validated by the gate; strict mode would rewrite them
            )
        )
    return tools


def airlock_function_tools(
    airlock: Airlock,
    run: Run,
    *,
    query: str | None = None,
    limit: int | None = None,
    wait_for_approvals: bool = True,
    approval_timeout: float = 600,
) -> list[FunctionTool]:
    """The agent's Airlock skills as OpenAI Agents SDK tools (discovered with `query` when given)."""
    definitions = airlock.tools(format="openai", query=query, limit=limit)
    return function_tools_from_definitions(
        definitions, run, wait_for_approvals=wait_for_approvals, approval_timeout=approval_timeout
    )
