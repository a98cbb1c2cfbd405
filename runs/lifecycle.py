"""The one owner of tool-call and run state. Nothing else writes `ToolCall.status` or `Run.status`.

Each machine is written once, as data (`CALL_MACHINE`, `RUN_MACHINE`; `docs/architecture.md`
draws them from here). A row moves only through a function below, as a conditional UPDATE from
the states the machine allows, and the function says whether it won: two workers racing for the
same call cannot both move it. A call about to be inserted gets its first state through
`first_status`, checked against the same table.

Executing calls hold a lease (`ToolCall.lease_expires_at`). A worker claims a call by moving it
to `executing` with a fresh lease; a call whose lease ran out was abandoned by a dead worker and
may be claimed again only where running it twice is harmless (reads and idempotent skills).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from lib import clock
from runs.models import CallStatus, Run, RunStatus, ToolCall

# Where a call may go from each state. `None` is "not recorded yet": the states a call is first stored in.
CALL_MACHINE: dict[str | None, frozenset[str]] = {
    None: frozenset(
        {
            CallStatus.DENIED,
            CallStatus.INVALID,
            CallStatus.AWAITING_APPROVAL,
            CallStatus.EXECUTING,
            CallStatus.SUCCEEDED,
            CallStatus.FAILED,
        }
    ),
    CallStatus.AWAITING_APPROVAL: frozenset(
        {CallStatus.EXECUTING, CallStatus.DECLINED, CallStatus.EXPIRED, CallStatus.DENIED, CallStatus.FAILED}
    ),
    CallStatus.EXECUTING: frozenset(
        {
            CallStatus.EXECUTING,
            CallStatus.SUCCEEDED,
            CallStatus.FAILED,
            CallStatus.TIMEOUT_UNKNOWN,
            CallStatus.DENIED,
            CallStatus.DECLINED,
        }
    ),
    # A long-running job's call is `succeeded` with "job accepted" until the job's end replaces that result.
    CallStatus.SUCCEEDED: frozenset(
        {CallStatus.SUCCEEDED, CallStatus.FAILED, CallStatus.DENIED, CallStatus.DECLINED, CallStatus.RECONCILED}
    ),
    CallStatus.TIMEOUT_UNKNOWN: frozenset({CallStatus.RECONCILED}),
}
CALL_FINAL = frozenset(
    {
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.DENIED,
        CallStatus.INVALID,
        CallStatus.DECLINED,
        CallStatus.EXPIRED,
        CallStatus.TIMEOUT_UNKNOWN,
        CallStatus.RECONCILED,
    }
)

RUN_MACHINE: dict[str | None, frozenset[str]] = {
    None: frozenset({RunStatus.RUNNING}),
    RunStatus.RUNNING: frozenset(
        {RunStatus.PAUSED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED}
    ),
    RunStatus.PAUSED: frozenset(
        {RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED}
    ),
}
RUN_CLOSED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED})

LEASE_MARGIN = timedelta(seconds=30)


class IllegalTransition(ValueError):
    """A caller asked for a move the machine does not have: a programming error, never a race."""


def call_sources(to: str) -> frozenset[str]:
    """The recorded states from which a call may move to `to`."""
    return frozenset(source for source, targets in CALL_MACHINE.items() if source is not None and to in targets)


def run_sources(to: str) -> frozenset[str]:
    return frozenset(source for source, targets in RUN_MACHINE.items() if source is not None and to in targets)


# Tool calls ----------------------------------------------------------------------------------------


def first_status(call: ToolCall, status: str) -> None:
    """Give a call that is not stored yet the state it will be inserted in."""
    if call.pk is not None:
        raise IllegalTransition(f"call {call.pk} is stored already; move it with a transition")
    if status not in CALL_MACHINE[None]:
        raise IllegalTransition(f"a call is never first recorded as {status}")
    call.status = status


def lease_for(timeout_s: float) -> timedelta:
    return timedelta(seconds=timeout_s) + LEASE_MARGIN


def move_call(
    call: ToolCall,
    *,
    to: str,
    only_from: frozenset[str] | set[str] | None = None,
    extra_filter: Q | None = None,
    **fields: Any,
) -> bool:
    """Move a stored call to `to` if it is in one of the allowed states; True if this caller won.

    `only_from` narrows the machine's sources (never widens them); `fields` are written in the same
    UPDATE and, when the move wins, onto `call` too.
    """
    sources = call_sources(to)
    if only_from is not None:
        if not set(only_from) <= sources:
            raise IllegalTransition(f"{sorted(set(only_from) - sources)} → {to} is not in the call machine")
        sources = frozenset(only_from)
    if not sources:
        raise IllegalTransition(f"nothing moves to {to}")
    queryset = ToolCall.objects.filter(pk=call.pk, status__in=sources)
    if extra_filter is not None:
        queryset = queryset.filter(extra_filter)
    won = bool(queryset.update(status=to, **fields))
    if won:
        call.status = to
        for name, value in fields.items():
            setattr(call, name, value)
    return won


def start_executing(call: ToolCall, *, timeout_s: float, now=None) -> None:
    """A new call of the gate, inserted as `executing` with its lease (saved by the caller)."""
    now = now or clock.now()
    first_status(call, CallStatus.EXECUTING)
    call.started_at, call.lease_expires_at = now, now + lease_for(timeout_s)


def claim_approved(call: ToolCall, *, timeout_s: float) -> bool:
    """The resume's claim: an approved call leaves `awaiting_approval` for `executing`, once."""
    now = clock.now()
    return move_call(
        call,
        to=CallStatus.EXECUTING,
        only_from={CallStatus.AWAITING_APPROVAL},
        started_at=now,
        lease_expires_at=now + lease_for(timeout_s),
    )


def reclaim_expired(call: ToolCall, *, timeout_s: float) -> bool:
    """Take over a call whose worker died (its lease ran out); only one taker wins."""
    now = clock.now()
    return move_call(
        call,
        to=CallStatus.EXECUTING,
        only_from={CallStatus.EXECUTING},
        extra_filter=Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True),
        started_at=now,
        lease_expires_at=now + lease_for(timeout_s),
    )


def lease_expired(call: ToolCall, now=None) -> bool:
    now = now or clock.now()
    return call.status == CallStatus.EXECUTING and (call.lease_expires_at is None or call.lease_expires_at < now)


def abandon_expired(call: ToolCall, *, result: dict) -> bool:
    """An expired lease on a call that must not run twice: its outcome is unknown (reconciliation follows)."""
    return move_call(
        call,
        to=CallStatus.TIMEOUT_UNKNOWN,
        only_from={CallStatus.EXECUTING},
        extra_filter=Q(lease_expires_at__lt=clock.now()) | Q(lease_expires_at__isnull=True),
        result=result,
        error_class="timeout_unknown",
        sealed_arguments="",
        lease_expires_at=None,
        finished_at=clock.now(),
    )


def finish_execution(call: ToolCall, *, status: str, **fields: Any) -> bool:
    """Record an execution's outcome on a call this worker holds (`executing` → final)."""
    if status not in CALL_FINAL:
        raise IllegalTransition(f"{status} is not an outcome")
    return move_call(
        call, to=status, only_from={CallStatus.EXECUTING}, lease_expires_at=None, sealed_arguments="", **fields
    )


def refuse_waiting(call: ToolCall, *, status: str, **fields: Any) -> bool:
    """An approval ended without execution (declined, expired, cancelled) or the approved call failed its
    live checks before it was claimed."""
    return move_call(
        call, to=status, only_from={CallStatus.AWAITING_APPROVAL}, sealed_arguments="", lease_expires_at=None, **fields
    )


def replace_outcome(call: ToolCall, *, status: str, **fields: Any) -> bool:
    """A provisional outcome (a job accepted, an unknown outcome) is replaced by the final one."""
    return move_call(
        call, to=status, only_from={CallStatus.SUCCEEDED, CallStatus.TIMEOUT_UNKNOWN} & call_sources(status), **fields
    )


def expired_leases(*, now=None, limit: int = 200) -> list[int]:
    """Calls left `executing` by a worker that died: their lease ran out."""
    now = now or clock.now()
    return list(
        ToolCall.objects.filter(status=CallStatus.EXECUTING, lease_expires_at__lt=now).values_list("pk", flat=True)[
            :limit
        ]
    )


# Runs ----------------------------------------------------------------------------------------------


def move_run(run: Run, *, to: str, only_from: frozenset[str] | set[str] | None = None, **fields: Any) -> bool:
    sources = run_sources(to) if only_from is None else frozenset(only_from)
    if not sources <= run_sources(to):
        raise IllegalTransition(f"{sorted(sources - run_sources(to))} → {to} is not in the run machine")
    now = timezone.now()
    won = bool(Run.objects.filter(pk=run.pk, status__in=sources).update(status=to, updated_at=now, **fields))
    if won:
        run.status = to
        for name, value in fields.items():
            setattr(run, name, value)
    return won


def _lock_run(run: Run) -> None:
    # Orders a pause against a resume of the same run: the later sees the other's commit.
    Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()


def pause_if_waiting(run: Run) -> bool:
    """Pause a running run while one of its calls still awaits a person (inside the caller's transaction)."""
    _lock_run(run)
    if not ToolCall.objects.filter(run=run, status=CallStatus.AWAITING_APPROVAL).exists():
        return False
    return move_run(run, to=RunStatus.PAUSED, only_from={RunStatus.RUNNING}, status_reason="waiting on approval")


def resume_if_unblocked(run: Run) -> bool:
    """A paused run runs again once none of its calls awaits a person (inside the caller's transaction)."""
    _lock_run(run)
    if ToolCall.objects.filter(run=run, status=CallStatus.AWAITING_APPROVAL).exists():
        return False
    return move_run(run, to=RunStatus.RUNNING, only_from={RunStatus.PAUSED}, status_reason="")


def close_run(run: Run, *, status: str, reason: str = "") -> bool:
    if status not in RUN_CLOSED:
        raise IllegalTransition(f"a run closes as one of {sorted(RUN_CLOSED)}, not {status}")
    return move_run(run, to=status, status_reason=reason[:300], finished_at=timezone.now())


def stop_run(run: Run, *, by_label: str, reason: str) -> bool:
    """A person ends an open run from outside (runs.services.stop_run); False if it was closed already."""
    return move_run(
        run,
        to=RunStatus.STOPPED,
        status_reason=reason[:300],
        stopped_by_label=by_label[:150],
        finished_at=timezone.now(),
    )


def is_open(run_status: str) -> bool:
    return run_status not in RUN_CLOSED


__all__ = [
    "CALL_FINAL",
    "CALL_MACHINE",
    "RUN_CLOSED",
    "RUN_MACHINE",
    "IllegalTransition",
    "abandon_expired",
    "call_sources",
    "claim_approved",
    "close_run",
    "expired_leases",
    "finish_execution",
    "first_status",
    "describe",
    "is_open",
    "lease_expired",
    "lease_for",
    "move_call",
    "move_run",
    "pause_if_waiting",
    "reclaim_expired",
    "refuse_waiting",
    "replace_outcome",
    "resume_if_unblocked",
    "start_executing",
    "stop_run",
]


def describe() -> str:
    """The two machines as the table docs/architecture.md shows (a test keeps the two identical)."""
    lines = ["| Machine | From | To |", "|---|---|---|"]
    for machine, table in (("call", CALL_MACHINE), ("run", RUN_MACHINE)):
        for source, targets in table.items():
            lines.append(f"| {machine} | {source or '(first recorded)'} | {', '.join(sorted(targets))} |")
    return "\n".join(lines)
