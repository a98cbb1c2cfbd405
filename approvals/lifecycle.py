"""The one owner of approval state. Nothing else writes `ApprovalRequest.status`.

The machine is written once, as data (`APPROVAL_MACHINE`; `docs/architecture.md` draws it from
`describe()`, and a test keeps the two identical). A request moves only through a function below,
as one conditional UPDATE from the states the machine allows, and the function says whether it won:
two approvers deciding at once, or an approver cancelling while a worker starts the call, cannot both
move it. A new request is created `pending` (`first_status`).

`scheduled` is an approved request waiting out its skill's undo window (`risk.delay_seconds`): any
approver who could have decided it may still cancel it until a worker claims it for execution.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, Q

from approvals.models import NEGATIVE_STATUSES, ApprovalRequest, ApprovalStatus
from lib import clock

# Where a request may go from each state. `None` is "not recorded yet": the state a request is created in.
APPROVAL_MACHINE: dict[str | None, frozenset[str]] = {
    None: frozenset({ApprovalStatus.PENDING}),
    ApprovalStatus.PENDING: frozenset(
        {ApprovalStatus.APPROVED, ApprovalStatus.DECLINED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED}
    ),
    ApprovalStatus.APPROVED: frozenset({ApprovalStatus.SCHEDULED, ApprovalStatus.EXECUTING}),
    ApprovalStatus.SCHEDULED: frozenset({ApprovalStatus.EXECUTING, ApprovalStatus.CANCELLED}),
    ApprovalStatus.EXECUTING: frozenset({ApprovalStatus.EXECUTED, ApprovalStatus.FAILED}),
}
APPROVAL_FINAL = frozenset(NEGATIVE_STATUSES | {ApprovalStatus.EXECUTED, ApprovalStatus.FAILED})
# Still moving: retention keeps a run while any of its requests is in one of these.
APPROVAL_LIVE = frozenset(source for source in APPROVAL_MACHINE if source is not None)


class IllegalTransition(ValueError):
    """A caller asked for a move the machine does not have: a programming error, never a race."""


def approval_sources(to: str) -> frozenset[str]:
    """The recorded states from which a request may move to `to`."""
    return frozenset(source for source, targets in APPROVAL_MACHINE.items() if source is not None and to in targets)


def first_status() -> str:
    """The state every request is created in."""
    (status,) = APPROVAL_MACHINE[None]
    return status


def move_approval(
    approval: ApprovalRequest,
    *,
    to: str,
    only_from: frozenset[str] | set[str] | None = None,
    extra_filter: Q | None = None,
    **fields: Any,
) -> bool:
    """Move a stored request to `to` if it is in one of the allowed states; True if this caller won.

    `only_from` narrows the machine's sources (never widens them); `fields` are written in the same
    UPDATE and, when the move wins, onto `approval` too (expressions such as `F()` are left for the
    caller to re-read).
    """
    sources = approval_sources(to)
    if only_from is not None:
        if not set(only_from) <= sources:
            raise IllegalTransition(f"{sorted(set(only_from) - sources)} → {to} is not in the approval machine")
        sources = frozenset(only_from)
    if not sources:
        raise IllegalTransition(f"nothing moves to {to}")
    queryset = ApprovalRequest.objects.filter(pk=approval.pk, status__in=sources)
    if extra_filter is not None:
        queryset = queryset.filter(extra_filter)
    won = bool(queryset.update(status=to, **fields))
    if won:
        approval.status = to
        for name, value in fields.items():
            if not hasattr(value, "resolve_expression"):
                setattr(approval, name, value)
    return won


def decide(approval: ApprovalRequest, *, to: str, now: datetime, **fields: Any) -> bool:
    """A person's decision (the last vote of a two-person request too): `pending` → approved or declined,
    only while the request has not expired."""
    if to not in (ApprovalStatus.APPROVED, ApprovalStatus.DECLINED):
        raise IllegalTransition(f"a person decides approved or declined, not {to}")
    return move_approval(
        approval, to=to, only_from={ApprovalStatus.PENDING}, extra_filter=Q(expires_at__gt=now), **fields
    )


def close_pending(approval: ApprovalRequest, *, to: str, **fields: Any) -> bool:
    """The system ends a request nobody decided: it expired, or its run closed."""
    if to not in (ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED):
        raise IllegalTransition(f"the system closes a pending request as expired or cancelled, not {to}")
    return move_approval(approval, to=to, only_from={ApprovalStatus.PENDING}, **fields)


def schedule(approval: ApprovalRequest, *, runs_at: datetime) -> bool:
    """An approved call of a skill with an undo window waits until `runs_at`."""
    return move_approval(approval, to=ApprovalStatus.SCHEDULED, scheduled_for=runs_at)


def cancel_scheduled(approval: ApprovalRequest, **fields: Any) -> bool:
    """Taken back during its undo window. Loses to a worker that already claimed the call."""
    return move_approval(approval, to=ApprovalStatus.CANCELLED, only_from={ApprovalStatus.SCHEDULED}, **fields)


def claim_execution(approval: ApprovalRequest) -> bool:
    """The resume's claim: an approved request, or a scheduled one whose window is over, starts executing once."""
    return move_approval(
        approval,
        to=ApprovalStatus.EXECUTING,
        extra_filter=Q(scheduled_for__isnull=True) | Q(scheduled_for__lte=clock.now()),
        resume_attempts=F("resume_attempts") + 1,
    )


def finish(approval: ApprovalRequest, *, to: str, **fields: Any) -> bool:
    """Record an execution's outcome, once: `executing` → executed or failed."""
    return move_approval(
        approval, to=to, only_from={ApprovalStatus.EXECUTING}, extra_filter=Q(completed_at__isnull=True), **fields
    )


def complete_refused(approval: ApprovalRequest, **fields: Any) -> bool:
    """Not a move: a declined, expired or cancelled request gets its outcome (what the agent received)
    recorded once; its status stays. True for the one caller that recorded it."""
    if approval.status not in NEGATIVE_STATUSES:
        raise IllegalTransition(f"{approval.status} is not a refusal")
    won = bool(
        ApprovalRequest.objects.filter(pk=approval.pk, status=approval.status, completed_at__isnull=True).update(
            **fields
        )
    )
    if won:
        for name, value in fields.items():
            setattr(approval, name, value)
    return won


def describe() -> str:
    """The machine as the table docs/architecture.md shows (a test keeps the two identical)."""
    lines = ["| From | To |", "|---|---|"]
    for source, targets in APPROVAL_MACHINE.items():
        lines.append(f"| {source or '(created)'} | {', '.join(sorted(targets))} |")
    return "\n".join(lines)
