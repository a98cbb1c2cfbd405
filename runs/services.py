"""Use cases of the runs app: start a run, and execute a call a person approved."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from airlock_sdk.policy.kernel import Path
from django.conf import settings
from django.db import transaction

from console.models import OperatorAction, Role
from console.services import record_operator_action
from lib import clock
from registry.snapshots import ResolvedSkill, latest_snapshot
from runs import authorization, client_exec, execution, lifecycle, pagination, recording
from runs.context_budget import budget_for as context_budget_for
from runs.errors import CallError, Internal
from runs.errors import span_attributes as error_span_attributes
from runs.events import append_event
from runs.gate import invocation_context, stored_page_outcome
from runs.models import CallStatus, IdempotencyRecord, Run, RunStatus, ToolCall
from traces.models import Span, SpanKind
from traces.recording import record_span, record_span_safely, start_trace
from traces.redaction import redact_text

logger = logging.getLogger(__name__)


def start_run(
    *,
    agent,
    end_user: str,
    end_user_roles: list[str] | None = None,
    task: str = "",
    callback_url: str = "",
    model: str = "",
    context_budget: int | None = None,
) -> Run:
    """A run pinned to the newest snapshot, bound to the end user the agent acts for. Secrets in the
    task (an API key pasted into a prompt), the end user and its roles are masked before they are stored.
    The API refuses a role that looks like a secret (runs/api/serializers.py), so masking never changes
    a role a policy reads; it keeps any other caller's from being stored in clear. `model` names the model
    the agent runs (its tokens are counted in that model's encoding); `context_budget` (tokens) defaults to
    the tenant's (runs/context_budget.py)."""
    if agent.is_suspended(clock.now()):
        raise authorization.agent_suspended(agent)
    snapshot = latest_snapshot(with_body=False)
    task, end_user = redact_text(task), redact_text(end_user, limit=200)
    end_user_roles = [redact_text(role) for role in end_user_roles or []]
    with transaction.atomic():
        run = Run.objects.create(
            tenant_id=agent.tenant_id,
            agent=agent,
            end_user=end_user,
            end_user_roles=end_user_roles,
            task=task,
            callback_url=callback_url,
            webhook_secret=secrets.token_urlsafe(32) if callback_url else "",
            snapshot=snapshot,
            model=model,
            context_budget=context_budget_for(asked=context_budget, tenant=agent.tenant),
        )
        start_trace(run)
    return run


class CallHeldElsewhere(Exception):
    """Another worker holds the call's lease; try again once it may have expired."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"another worker is executing this call; retry in {retry_after:.0f}s")
        self.retry_after = retry_after


class AgentSuspended(Exception):
    """The call's agent is suspended: an approved call waits (it is not refused) and is tried again once
    the suspension may have ended."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"the agent is suspended; retry in {retry_after:.0f}s")
        self.retry_after = retry_after


HELD_SPAN = "held: agent suspended"


def _hold_while_suspended(call: ToolCall) -> None:
    agent, now = call.run.agent, clock.now()
    if call.status != CallStatus.AWAITING_APPROVAL or not agent.is_suspended(now):
        return
    if not Span.objects.filter(call=call, name=HELD_SPAN).exists():  # once on the timeline, not at every look
        record_span_safely(
            what=f"the hold of call {call.pk}",
            run=call.run,
            kind=SpanKind.APPROVAL,
            name=HELD_SPAN,
            started_at=now,
            ended_at=now,
            call=call,
            skill_name=call.name,
            attributes={"airlock.held.reason": agent.suspension_notice()},
        )
    until = agent.suspended_until
    recheck = settings.AIRLOCK_SUSPENDED_RECHECK_SECONDS
    wait = (until - now).total_seconds() + 1 if until else recheck
    raise AgentSuspended(retry_after=max(1.0, min(wait, recheck)))


def execute_approved_call(*, call: ToolCall, arguments: dict) -> dict:
    """Claim, re-authorize live, execute once with the call's idempotency key, and record the outcome.

    Returns the result as the agent sees it. Safe to run any number of times, concurrently too: only
    the worker whose claim wins acts; a call already final returns its recorded result; a call another
    worker holds raises CallHeldElsewhere; a call of a suspended agent is not claimed and raises
    AgentSuspended (it waits); a write whose worker died mid-execution (its lease ran out) is never run
    again but becomes `timeout_unknown` and goes to reconciliation.
    """
    call = ToolCall.objects.select_related("run__tenant", "run__agent", "run__snapshot").get(pk=call.pk)
    if call.status in lifecycle.CALL_FINAL:
        return call.result or _error(call, Internal("The call ended without a recorded result.", code="no_result"))
    _hold_while_suspended(call)
    skill = _skill_of(call)
    timeout_s = client_exec.lease_seconds(skill.manifest) if skill else execution.DEFAULT_TIMEOUT_MS / 1000
    if not _claim(call, skill, timeout_s):
        return _after_lost_claim(call, skill)
    refusal = authorization.recorded_call_refusal(
        path=Path.APPROVED_RESUME, call=call, arguments=arguments, approved_verdict="confirm"
    )
    if refusal is not None:
        result = recording.refuse_claimed(call=call, error=refusal, key_record=_key_record(call))
        if skill is not None:
            _record_execution_span(call, skill, refused=refusal)
        return result
    if client_exec.is_client_skill(skill.manifest):
        return client_exec.issue_client_token(call=call, arguments=arguments)
    outcome = None
    try:
        outcome = _approved_outcome(call, skill, arguments)
        result = recording.record_execution(
            call=call,
            skill=skill,
            outcome=outcome,
            warnings=list(call.warnings or []),
            key_record=_key_record(call),
            arguments=arguments,
        )
    except Exception:
        logger.exception("Approved call %s failed around its execution", call.pk)
        return recording.settle_after_failure(call=call, key_record=_key_record(call), executed=outcome is not None)
    _record_execution_span(call, skill, error=outcome.error)
    return result


def _skill_of(call: ToolCall) -> ResolvedSkill | None:
    return authorization.recorded_skill(call)


def _approved_outcome(call: ToolCall, skill: ResolvedSkill, arguments: dict) -> execution.Outcome:
    """Run the approved call; an approved page of a kept result is read from the record, the tool never
    runs again for it."""
    page = pagination.recorded_page(call)
    if page is not None:
        return stored_page_outcome(page, run_id=str(call.run_id))
    return execution.execute(
        manifest=skill.manifest, effect=skill.effect, arguments=arguments, context=invocation_context(call.run, call)
    )


def _may_run_twice(skill: ResolvedSkill | None) -> bool:
    return skill is not None and (
        skill.effect in execution.READ_EFFECTS or bool((skill.manifest.get("execution") or {}).get("idempotent"))
    )


def _claim(call: ToolCall, skill: ResolvedSkill | None, timeout_s: float) -> bool:
    if call.status == CallStatus.AWAITING_APPROVAL:
        return lifecycle.claim_approved(call, timeout_s=timeout_s)
    if lifecycle.lease_expired(call) and _may_run_twice(skill):
        return lifecycle.reclaim_expired(call, timeout_s=timeout_s)
    return False


def _after_lost_claim(call: ToolCall, skill: ResolvedSkill | None) -> dict:
    call.refresh_from_db()
    if call.status in lifecycle.CALL_FINAL:
        return call.result or _error(call, Internal("The call ended without a recorded result.", code="no_result"))
    if call.status == CallStatus.EXECUTING and lifecycle.lease_expired(call) and not _may_run_twice(skill):
        return recording.settle_abandoned(call)
    if call.status == CallStatus.EXECUTING:
        remaining = (call.lease_expires_at - clock.now()).total_seconds() if call.lease_expires_at else 1
        raise CallHeldElsewhere(retry_after=max(1.0, remaining + 1))
    return _error(call, Internal("The call is in no state to execute.", code="not_executable"))


def settle_expired_leases(*, grace: timedelta = timedelta(minutes=5)) -> int:
    """Beat: calls whose worker died and that nobody took over within `grace` become unknown outcomes
    for reconciliation, so no call stays `executing` for ever."""
    settled = 0
    for pk in lifecycle.expired_leases(now=clock.now() - grace):
        call = ToolCall.objects.select_related("run__tenant").get(pk=pk)
        if call.status == CallStatus.EXECUTING:
            recording.settle_abandoned(call)
            settled += 1
    return settled


def _key_record(call: ToolCall) -> IdempotencyRecord | None:
    if not call.idempotency_key:
        return None
    record, _ = IdempotencyRecord.objects.get_or_create(
        tenant_id=call.run.tenant_id,
        key=call.idempotency_key,
        defaults={"arguments_sha256": call.arguments_sha256, "skill_name": call.name, "call": call},
    )
    return record


def _error(call: ToolCall, error) -> dict:
    return {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}


def _record_execution_span(call: ToolCall, skill, refused=None, error: CallError | None = None) -> None:
    attributes = {"airlock.refused.code": refused.code, "airlock.refused.reason": refused.message} if refused else {}
    if error is not None:
        attributes.update(error_span_attributes(error))
    record_span_safely(
        what=f"the execution span of call {call.pk}",
        run=call.run,
        kind="tool_call",
        name=f"{call.name} (approved)",
        started_at=call.started_at,
        ended_at=call.finished_at,
        call=call,
        skill_name=call.name,
        skill_version=skill.version,
        verdict=call.verdict,
        outcome=call.status,
        error_class=call.error_class,
        attributes=attributes,
    )


def run_summary(run: Run, calls: list[ToolCall]) -> dict:
    """The run as its agent reads it; a stopped run carries the `run_stopped` refusal naming who and why."""
    stopped = authorization.stopped_refusal(run)
    return {
        **({"error": stopped.as_error()} if stopped else {}),
        "run_id": str(run.pk),
        "status": run.status,
        "status_reason": run.status_reason,
        "tainted": run.tainted,
        "taint_source": run.taint_source,
        "snapshot": run.snapshot.number,
        "created_at": run.created_at.isoformat(),
        "calls": [
            {
                "call_id": c.call_id,
                "name": c.name,
                "status": c.status,
                "verdict": c.verdict,
                "error_class": c.error_class,
            }
            for c in calls
        ],
    }


class RunAlreadyClosed(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(f"The run is already {run.status}.")
        self.run = run


CLOSED_RUN_STATUSES = lifecycle.RUN_CLOSED


def finish_run(*, run: Run, status: str, reason: str = "") -> Run:
    """The agent says the run is over. Idempotent for the same status; pending approvals are cancelled
    by the `run.status` event's listeners, so nothing resumes a closed run."""
    if status not in CLOSED_RUN_STATUSES:
        raise ValueError(f"A run finishes as one of {', '.join(sorted(CLOSED_RUN_STATUSES))}, not {status!r}.")
    with transaction.atomic():
        closed = lifecycle.close_run(run, status=status, reason=redact_text(reason, limit=300))
        run.refresh_from_db()
        if not closed:
            if run.status == status:
                return run
            raise RunAlreadyClosed(run)
        append_event(run=run, kind="run.status", payload={"status": status, "reason": run.status_reason})
        record_span(
            run=run,
            kind="run",
            name=f"run {status}",
            started_at=run.created_at,
            ended_at=run.finished_at,
            outcome=status,
            attributes={"airlock.run.reason": run.status_reason},
        )
    return run


RUN_STOPPERS = (Role.APPROVER, Role.ADMIN)  # who of a tenant may stop its runs


def stop_run(*, run: Run, by, reason: str) -> Run:
    """A person stops an open run from outside: it closes as `stopped` naming who and why, its pending
    approvals are cancelled with that reason (the `run.status` event's listener), an approved call
    still queued refuses at its live check, and the agent's next call is refused with `run_stopped`.
    Idempotent once stopped; a run closed otherwise raises RunAlreadyClosed."""
    reason = redact_text(reason, limit=300)
    with transaction.atomic():
        stopped = lifecycle.stop_run(run, by_label=by.get_username(), reason=reason)
        run.refresh_from_db()
        if not stopped:
            if run.status == RunStatus.STOPPED:
                return run
            raise RunAlreadyClosed(run)
        record_operator_action(
            tenant=run.tenant,
            action=OperatorAction.Action.RUN_STOPPED,
            target=str(run.pk),
            by=by,
            reason=reason,
            agent=run.agent.name,
        )
        append_event(
            run=run,
            kind="run.status",
            payload={"status": run.status, "reason": reason, "stopped_by": run.stopped_by_label},
        )
        record_span(
            run=run,
            kind="run",
            name=f"run stopped by {run.stopped_by_label}",
            started_at=run.finished_at,
            ended_at=run.finished_at,
            outcome=RunStatus.STOPPED,
            attributes={"airlock.run.reason": reason, "airlock.run.stopped_by": run.stopped_by_label},
        )
    return run
