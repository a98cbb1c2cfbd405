"""Use cases of the runs app: start a run, and execute a call a person approved."""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from registry.snapshots import index_for, latest_snapshot
from runs import execution, recording
from runs.errors import Internal, NotFound
from runs.models import CallStatus, IdempotencyRecord, Run, RunStatus, ToolCall

FINAL_STATUSES = {CallStatus.SUCCEEDED, CallStatus.FAILED, CallStatus.DENIED, CallStatus.INVALID,
                  CallStatus.DECLINED, CallStatus.EXPIRED, CallStatus.TIMEOUT_UNKNOWN, CallStatus.RECONCILED}


def start_run(*, agent, end_user: str, end_user_roles: list[str] | None = None, task: str = "",
              callback_url: str = "") -> Run:
    """A run pinned to the newest snapshot, bound to the end user the agent acts for."""
    from traces.recording import ensure_trace

    snapshot = latest_snapshot()
    with transaction.atomic():
        run = Run.objects.create(tenant_id=agent.tenant_id, agent=agent, end_user=end_user,
                                 end_user_roles=list(end_user_roles or []), task=task, callback_url=callback_url,
                                 webhook_secret=secrets.token_urlsafe(32) if callback_url else "", snapshot=snapshot)
        ensure_trace(run)
    return run


def execute_approved_call(*, call: ToolCall, arguments: dict) -> dict:
    """Execute an approved call with its idempotency key and record the outcome; the result as the agent sees it.

    Idempotent: a call that already reached a final outcome returns it without executing, and so
    does a call whose key already holds an outcome (a worker died after executing).
    """
    call = ToolCall.objects.select_related("run__tenant", "run__agent", "run__snapshot").get(pk=call.pk)
    if call.status in FINAL_STATUSES and call.result is not None and call.result.get("status") != "approval_required":
        return call.result
    record = IdempotencyRecord.objects.filter(tenant_id=call.run.tenant_id, key=call.idempotency_key).first() \
        if call.idempotency_key else None
    if record is not None and record.outcome is not None:
        return _finish(call, {**record.outcome, "call_id": call.call_id}, status=CallStatus.SUCCEEDED)
    claimed = ToolCall.objects.filter(pk=call.pk, status__in=[CallStatus.AWAITING_APPROVAL, CallStatus.EXECUTING]) \
        .update(status=CallStatus.EXECUTING, started_at=timezone.now())
    if not claimed:
        call.refresh_from_db()
        return call.result or {"call_id": call.call_id, "status": "error", "is_error": True,
                               "error": Internal("The call is in no state to execute.", code="not_executable")
                               .as_error()}
    skill = index_for(call.run.snapshot).resolve(call.name, call.requested_version or None)
    if skill is None or skill.skill_version_id != call.skill_version_id:
        error = NotFound(f"{call.name} is no longer callable.", code="retired")
        return _finish(call, {"call_id": call.call_id, "status": "error", "is_error": True,
                              "error": error.as_error()}, status=CallStatus.FAILED, error_class=error.error_class)
    from runs import client_exec
    from runs.gate import invocation_context

    if client_exec.is_client_skill(skill.manifest):
        return client_exec.issue_client_token(call=call, arguments=arguments)
    outcome = execution.execute(manifest=skill.manifest, effect=skill.effect, arguments=arguments,
                                context=invocation_context(call.run, call))
    result = recording.apply_outcome(call=call, skill=skill, outcome=outcome, warnings=list(call.warnings or []))
    call.save()
    if record is None and call.idempotency_key and call.status == CallStatus.SUCCEEDED:
        record, _ = IdempotencyRecord.objects.get_or_create(
            tenant_id=call.run.tenant_id, key=call.idempotency_key,
            defaults={"arguments_sha256": call.arguments_sha256, "skill_name": call.name, "call": call})
    recording.remember_outcome(key_record=record, call=call, result=result)
    _record_execution_span(call, skill)
    return result


def _finish(call: ToolCall, result: dict, *, status: str, error_class: str = "") -> dict:
    ToolCall.objects.filter(pk=call.pk).update(status=status, result=result, error_class=error_class,
                                                sealed_arguments="", finished_at=timezone.now())
    return result


def _record_execution_span(call: ToolCall, skill) -> None:
    from traces.recording import record_span

    try:
        record_span(run=call.run, kind="tool_call", name=f"{call.name} (approved)", started_at=call.started_at,
                    ended_at=call.finished_at, call=call, skill_name=call.name, skill_version=skill.version,
                    verdict=call.verdict, outcome=call.status, error_class=call.error_class)
    except Exception:  # noqa: BLE001 - the outcome is recorded on the call already
        import logging

        logging.getLogger(__name__).exception("Could not record the execution span of call %s", call.pk)


def run_summary(run: Run, calls: list[ToolCall]) -> dict:
    return {
        "run_id": str(run.pk), "status": run.status, "status_reason": run.status_reason, "tainted": run.tainted,
        "taint_source": run.taint_source, "snapshot": run.snapshot.number, "created_at": run.created_at.isoformat(),
        "calls": [{"call_id": c.call_id, "name": c.name, "status": c.status, "verdict": c.verdict,
                   "error_class": c.error_class} for c in calls],
    }


class RunAlreadyClosed(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(f"The run is already {run.status}.")
        self.run = run


CLOSED_RUN_STATUSES = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}


def finish_run(*, run: Run, status: str, reason: str = "") -> Run:
    """The agent says the run is over. Idempotent for the same status; pending approvals are cancelled
    by the `run.status` event's listeners, so nothing resumes a closed run."""
    from runs.events import append_event
    from traces.recording import record_span

    if status not in CLOSED_RUN_STATUSES:
        raise ValueError(f"A run finishes as one of {', '.join(sorted(CLOSED_RUN_STATUSES))}, not {status!r}.")
    now = timezone.now()
    with transaction.atomic():
        closed = Run.objects.filter(pk=run.pk).exclude(status__in=CLOSED_RUN_STATUSES).update(
            status=status, status_reason=reason[:300], finished_at=now)
        run.refresh_from_db()
        if not closed:
            if run.status == status:
                return run
            raise RunAlreadyClosed(run)
        append_event(run=run, kind="run.status", payload={"status": status, "reason": run.status_reason})
        record_span(run=run, kind="run", name=f"run {status}", started_at=run.created_at, ended_at=now,
                    outcome=status, attributes={"airlock.run.reason": run.status_reason})
    return run
