"""What the framework adapters share: one model turn's tool calls as one batch, and the outcome of a
call that waited for a person, found again from any process.

A turn's calls go to the gate together, so the gate overlaps the reads and runs the writes one at
a time in the model's order. A call id is kept once per run and the gate replays what it recorded
for it, so proposing the same call again (after a restart, or when a framework re-runs a step)
never executes it twice: it answers the recorded outcome, or the pending approval with its id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airlock_sdk import fencing
from airlock_sdk.errors import AirlockError
from airlock_sdk.results import ApprovalRequired, Error, Ok, Result, more_for_model
from airlock_sdk.run import Run

MODEL_ACTIONABLE_DETAILS = ("downstream_message", "downstream_code", "meaning", "retryable")
FINAL_REFUSALS = {"declined", "expired"}  # a person (or the deadline) said no: the call never runs


@dataclass(frozen=True)
class ProposedCall:
    call_id: str
    skill: str
    arguments: dict[str, Any]

    def as_batch_entry(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.skill, "arguments": self.arguments}


def replaced_text(run: Run, call_id: Any) -> str | None:
    """What the model is given instead of a result the run's context budget replaced: the same
    {"summary", "ref"} the gate returns for a result it replaces in its own batch; None for the others."""
    entry = run.context_replaced.get(str(call_id))
    return json.dumps(entry) if entry is not None else None


def unreachable(call_id: str, exc: AirlockError) -> Error:
    return Error(call_id=call_id, error_class="unavailable", message=f"Airlock could not be reached: {exc}")


def send_turn(run: Run, calls: list[ProposedCall], exposed_tools: list[str] | None = None) -> dict[str, Result]:
    """The turn's calls as one batch; each result by call id (transport failures become `unavailable`).
    `exposed_tools`: the names of the tools the model was shown this turn, recorded with the calls."""
    if not calls:
        return {}
    try:
        results = run.call([call.as_batch_entry() for call in calls], exposed_tools=exposed_tools)
    except AirlockError as exc:
        return {call.call_id: unreachable(call.call_id, exc) for call in calls}
    return {result.call_id: result for result in results}


def wait_for_outcome(run: Run, call: ProposedCall, known: Result | None, *, timeout: float) -> Result:
    """The final result of a call that needed a person: executed, failed, declined or expired.

    Without the pending result at hand (another process proposed it), the call is proposed again:
    the gate answers with the recorded approval, or the outcome if it is already settled.
    Raises ApprovalTimeout while the person has not decided.
    """
    if known is None:
        [known] = run.call([call.as_batch_entry()])
    if isinstance(known, ApprovalRequired):
        return run.wait(known.approval_id, timeout=timeout)
    return known


def is_refusal(result: Result) -> bool:
    return isinstance(result, Error) and result.error_class in FINAL_REFUSALS


def render(result: Result) -> str:
    """What the model reads back: the content (fenced, with its provenance, when the gate marked where it
    came from: airlock_sdk.fencing, the same text the MCP gateway gives), or the error with its class."""
    if isinstance(result, Ok):
        if result.provenance is not None:
            text = fencing.for_model(result.content, result.provenance)
        else:
            text = result.content if isinstance(result.content, str) else json.dumps(result.content, default=str)
        return "\n\n".join([text, *more_for_model(result.raw)])  # other views, and the next page's handle
    if isinstance(result, ApprovalRequired):
        return json.dumps(
            {
                "status": "approval_pending",
                "approval_id": result.approval_id,
                "message": "A person must approve this action in Airlock; it has not been decided yet. "
                "Do not retry it; tell the user it is waiting for approval.",
            }
        )
    error: dict[str, Any] = {"class": result.error_class, "code": result.code, "message": result.message}
    if result.retry_after is not None:
        error["retry_after"] = result.retry_after
    if result.fields:
        error["fields"] = result.fields
    for said in MODEL_ACTIONABLE_DETAILS:  # the service's own words (redacted, bounded) and the declared meaning
        if said in result.details:
            error[said] = result.details[said]
    return json.dumps({"error": error})


def arguments_of(raw: Any) -> dict[str, Any]:
    """A tool call's arguments from the JSON text models send (an object, or nothing)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
