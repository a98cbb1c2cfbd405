"""What the human loop (approvals/) asks of a call that waited for a person, as use cases.

Approvals never names a call or run state: it asks here to execute an approved call, to settle one a
person refused, to let the run go on once nothing of it waits, and whether a call already has its
outcome. The states themselves stay with their one owner, `runs.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Q
from django.utils import timezone

from runs import lifecycle
from runs.events import append_event
from runs.models import CallStatus, Run, RunEvent, RunStatus, ToolCall
from runs.services import execute_approved_call

# The agent-facing error class of a refusal → the state its call ends in.
_REFUSED_AS = {"expired": CallStatus.EXPIRED}


def has_outcome(call: ToolCall) -> bool:
    """The call already ended (a worker died after recording it, or the lease sweep settled it)."""
    return call.status in lifecycle.CALL_FINAL


def with_outcome(path: str = "call") -> Q:
    """`has_outcome` as a filter on a model that reaches the call through `path`."""
    return Q(**{f"{path}__status__in": lifecycle.CALL_FINAL})


def execute_approved(*, call: ToolCall, arguments: Callable[[], Any]) -> dict:
    """Run a call a person approved, once; `arguments` is read only when the call has no outcome yet
    (a call that already ended needs none: its raw arguments are gone)."""
    return execute_approved_call(call=call, arguments=None if has_outcome(call) else arguments())


def settle_refused(*, call: ToolCall, result: dict) -> bool:
    """A person (or the clock) said no: the waiting call ends with `result`, the typed refusal the agent
    receives. An expiry ends it as expired, anything else as declined. True if this caller settled it."""
    status = _REFUSED_AS.get((result.get("error") or {}).get("class"), CallStatus.DECLINED)
    return lifecycle.refuse_waiting(
        call, status=status, error_class=result["error"]["class"], result=result, finished_at=timezone.now()
    )


def resume_run_if_unblocked(run: Run) -> bool:
    """The run waits on approvals while any of its calls does; once none does, it runs again (inside the
    caller's transaction)."""
    if not lifecycle.resume_if_unblocked(run):
        return False
    append_event(run=run, kind="run.status", payload={"status": RunStatus.RUNNING, "reason": "approvals settled"})
    return True


def closes_run(event: RunEvent) -> bool:
    """The event says the run ended: nothing of it will resume."""
    return event.kind == "run.status" and event.payload.get("status") in lifecycle.RUN_CLOSED
