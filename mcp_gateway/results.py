"""Gate results as MCP tool results: `ok` is the content (fenced with its provenance when the gate marked
where it came from, the same text the SDK's integrations give a model: airlock_sdk.fencing), an error is a
tool error (`isError`) naming its typed class, and a call waiting for a person is an 'approval pending'
answer naming the approval."""

from __future__ import annotations

import json

import mcp_types as types
from airlock_sdk import fencing
from airlock_sdk.results import more_for_model

from mcp_gateway.calls import ApprovalState
from mcp_gateway.catalog import CHECK_APPROVAL


def _text(value: object) -> types.TextContent:
    return types.TextContent(type="text", text=value if isinstance(value, str) else json.dumps(value, default=str))


def error(error_class: str, code: str, message: str, **extra: object) -> types.CallToolResult:
    body = {"status": "error", "is_error": True, "error": {"class": error_class, "code": code, "message": message}}
    body["error"].update(extra)
    return from_gate(body)


def from_gate(result: dict) -> types.CallToolResult:
    """A settled gate result (ok or error) as the MCP client receives it; `structuredContent` is the gate's
    own result object, so nothing the REST API tells an agent is lost."""
    if result.get("status") == "ok":
        origin = result.get("provenance")
        content = [_text(fencing.for_model(result.get("content"), origin) if origin else result.get("content"))]
        if result.get("warnings"):
            content.append(_text("Airlock warnings: " + " ".join(result["warnings"])))
        content += [_text(line) for line in more_for_model(result)]  # other views, the next page
        return types.CallToolResult(content=content, structured_content=result, is_error=False)
    if result.get("status") == "execute_locally":
        return error(
            "validation",
            "client_executed_skill",
            "This skill runs in the agent's own process through the Airlock SDK; an MCP client cannot run it.",
        )
    failure = result.get("error") or {}
    text = f"{failure.get('class', 'internal')} ({failure.get('code', 'error')}): {failure.get('message', '')}"
    if failure.get("downstream_message"):  # the service's own words, redacted and bounded by the gate
        text += f" The service said: {failure['downstream_message']}"
    if failure.get("meaning"):
        text += f" Meaning: {failure['meaning']}"
        text += " Retrying later can help." if failure.get("retryable") else " Retrying will not help."
    return types.CallToolResult(content=[_text(text)], structured_content=result, is_error=True)


def pending(state: ApprovalState, *, waited_s: float) -> types.CallToolResult:
    """Not an error: the call is recorded and waits for the tenant's approvers in the inbox."""
    waiting_for = "a person's decision" if state.status == "pending" else "the approved call to finish"
    body = {
        "status": "approval_pending",
        "is_error": False,
        "approval_id": state.approval_id,
        "approval_status": state.status,
        "proposed_action": state.proposed_action,
        "expires_at": state.expires_at,
        "check_with": {"tool": CHECK_APPROVAL, "arguments": {"approval_id": state.approval_id}},
    }
    text = (
        f"Approval pending: approval {state.approval_id} is waiting for {waiting_for} (waited {waited_s:.0f} s; "
        f"it expires at {state.expires_at}). Nothing has run yet. Call {CHECK_APPROVAL} with approval_id "
        f"{state.approval_id} to get the result once it is decided; do not propose the call again."
    )
    return types.CallToolResult(content=[_text(text)], structured_content=body, is_error=False)
