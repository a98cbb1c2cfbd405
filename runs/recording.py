"""Turning outcomes into agent-facing results, and writing a batch's calls, run state and spans."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from lib.canonical import sha256_of
from registry.snapshots import ResolvedSkill
from runs import batch_write, hooks, lifecycle, result_facts
from runs.errors import GENERIC_INTERNAL, CallError, Internal, TimeoutUnknown, Transient
from runs.errors import span_attributes as error_span_attributes
from runs.execution import Outcome
from runs.models import CallStatus, IdempotencyRecord, Run, RunStatus, ToolCall
from runs.presenting import present
from traces.models import Span
from traces.recording import recording_spans, save_spans, unsaved_span

if TYPE_CHECKING:
    from runs.gate import Planned

logger = logging.getLogger(__name__)
RETRYABLE_CLASSES = {"transient", "unavailable", "rate_limited"}
NOT_RECORDED = Transient(
    "Airlock could not record this call, so it changed nothing; send the same batch again.",
    code="not_recorded",
    retry_after=1,
)


OUTCOME_FIELDS = (
    "started_at",
    "finished_at",
    "attempts",
    "error_class",
    "truncated",
    "result_bytes",
    "result_tokens",
    "result_sha256",
    "result",
    "warnings",
    "decision",
)


def outcome_status(outcome: Outcome) -> str:
    if outcome.error is None:
        return CallStatus.SUCCEEDED
    return CallStatus.TIMEOUT_UNKNOWN if outcome.error.error_class == "timeout_unknown" else CallStatus.FAILED


def apply_outcome(
    *, call: ToolCall, skill: ResolvedSkill, outcome: Outcome, warnings: list[str], arguments: dict | None = None
) -> dict:
    """Shape the outcome into the contract's result and set it on the call (its state moves in runs.lifecycle).
    `arguments`: the call's own (unredacted), which a `next` handle carries; without them no handle is issued."""
    call.started_at, call.finished_at = outcome.started_at or call.started_at, outcome.finished_at
    tried = len(getattr(outcome.trail, "attempts", None) or ()) or 1  # retries happen in reliability/
    call.attempts = (call.attempts or 0) + tried
    call.warnings = list(warnings)
    if outcome.error is not None:
        error = outcome.error
        call.error_class = error.error_class
        result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}
    else:
        presented = present(
            content=outcome.content, skill=skill, call=call, arguments=arguments, provenance=outcome.provenance
        )
        shaped = presented.shaped
        call.error_class = ""
        call.truncated, call.result_bytes = shaped.truncated, shaped.size
        facts = result_facts.record_facts(call=call, manifest=skill.manifest, content=shaped.content)
        call.decision = {**(call.decision or {}), "shaping": shaped.summary, **facts}
        call.result_sha256 = sha256_of(shaped.content)
        result = {
            "call_id": call.call_id,
            "status": "ok",
            "is_error": False,
            "content": shaped.content,
            "skill": {"name": skill.name, "version": skill.version},
            "truncated": shaped.truncated,
            "warnings": list(warnings),
        }
        if getattr(outcome, "provenance", None):  # set by runs.plane.execution when it cleaned the content
            result["provenance"] = outcome.provenance
        if shaped.truncated:
            result["truncation"] = shaped.truncation
            result["warnings"].append(shaped.truncation["message"])
        result.update(presented.envelope)  # the view it is, the others, and `next` when there is more
    call.result = result
    call.sealed_arguments = ""
    return result


def record_execution(
    *,
    call: ToolCall,
    skill: ResolvedSkill,
    outcome: Outcome,
    warnings: list[str],
    key_record: IdempotencyRecord | None,
    arguments: dict | None = None,
) -> dict:
    """A claimed call's outcome, committed with its idempotency record before anything else happens."""
    result = apply_outcome(call=call, skill=skill, outcome=outcome, warnings=warnings, arguments=arguments)
    with transaction.atomic():
        if lifecycle.finish_execution(
            call, status=outcome_status(outcome), **{name: getattr(call, name) for name in OUTCOME_FIELDS}
        ):
            remember_outcome(key_record=key_record, call=call, result=result)
            return result
    # The lease sweep settled the call first (timeout_unknown, reconciling): what is recorded is the truth.
    logger.warning("Call %s was settled elsewhere before its outcome was recorded", call.pk)
    call.refresh_from_db()
    return call.result or result


def refuse_claimed(*, call: ToolCall, error: CallError, key_record: IdempotencyRecord | None) -> dict:
    """A claimed call failed its live checks: nothing ran; the refusal is its recorded outcome."""
    result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}
    status = CallStatus.DECLINED if error.error_class == "declined" else CallStatus.DENIED
    decision = {**(call.decision or {}), "refused_at_execution": {"code": error.code, "reason": error.message}}
    with transaction.atomic():
        if lifecycle.finish_execution(
            call,
            status=status,
            result=result,
            error_class=error.error_class,
            decision=decision,
            finished_at=timezone.now(),
        ):
            remember_outcome(key_record=key_record, call=call, result=result)
    return result


def settle_after_failure(*, call: ToolCall, key_record: IdempotencyRecord | None, executed: bool) -> dict:
    """Something failed around an execution: never leave the call `executing` with no outcome.

    Before the side effect ran, the call failed and nothing happened. After, its outcome is unknown to
    us: `timeout_unknown`, and reconciliation asks the tool (or an owner) what happened.
    """
    if executed:
        error = TimeoutUnknown(
            "The call ran, but Airlock could not record its outcome; do not repeat it with a new "
            "idempotency key. It is being reconciled.",
            code="outcome_unrecorded",
        )
        status = CallStatus.TIMEOUT_UNKNOWN
    else:
        error = Internal(GENERIC_INTERNAL)
        status = CallStatus.FAILED
    result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}
    try:
        with transaction.atomic():
            lifecycle.finish_execution(
                call, status=status, result=result, error_class=error.error_class, finished_at=timezone.now()
            )
            if not executed:
                remember_outcome(key_record=key_record, call=call, result=result)
        if executed:
            open_unknown_outcome(call)
    except Exception:  # the lease sweep (runs.lifecycle.expired_leases) settles it later
        logger.exception("Could not settle call %s after a failure", call.pk)
    return result


def open_unknown_outcome(call: ToolCall) -> None:
    hooks.open_reconciliation(call=call, reason="timeout", note="The call ran but its outcome was not recorded.")


def settle_abandoned(call: ToolCall) -> dict:
    """A process died while executing a call that must not run twice: its outcome is unknown, so it is
    reconciled (the tool is asked by idempotency key, or an owner decides); it never runs again. Whoever
    notices first (the beat's sweep, a redelivered resume, the agent's replay) settles it; the others read
    the same result."""
    error = TimeoutUnknown(
        "The worker executing this call stopped before recording its outcome; it will not "
        "be repeated. Its outcome is being reconciled.",
        code="lease_expired",
    )
    result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}
    with transaction.atomic():
        if lifecycle.abandon_expired(call, result=result):
            open_unknown_outcome(call)
            return result
    call.refresh_from_db()
    return call.result or result


def remember_outcome(*, key_record: IdempotencyRecord | None, call: ToolCall, result: dict) -> None:
    """The first final outcome stays with the key; a retryable failure frees the key for a retry."""
    if key_record is None:
        return
    error_class = (result.get("error") or {}).get("class")
    if error_class in RETRYABLE_CLASSES:
        key_record.delete()
    elif error_class != "timeout_unknown":
        IdempotencyRecord.objects.filter(pk=key_record.pk).update(outcome=result)


def record_batch(*, run: Run, plans: list[Planned], tainted_before: bool) -> None:
    """Insert the calls of the batch not stored yet (the executed ones already are), the run's taint and
    pause, and one span per call, in one commit. If that fails, the unstored calls' results become
    `transient` errors (retry the same batch): nothing they did is left unrecorded, since none of them had a
    side effect, and the retry runs them again.

    When the run itself does not change (no new taint, nothing to pause for), PostgreSQL writes it all in
    one statement (runs/batch_write.py); anything that stops that statement writes it the ordinary way."""
    now = timezone.now()
    new_calls = []
    for plan in plans:
        call = plan.tool_call
        if call is None or call.pk is not None:
            continue
        call.result, call.warnings = plan.result, plan.warnings
        call.finished_at = call.finished_at or now
        new_calls.append(call)
    if run.tainted == tainted_before and not _waiting(plans) and _write_in_one_statement(run, plans, new_calls, now):
        return
    try:
        with transaction.atomic():  # one commit for the batch's outcome and its spans, not one per row
            if new_calls:
                ToolCall.objects.bulk_create(new_calls)
            _update_run(run, plans)
            _record_spans(run, plans, now)
    except Exception:
        logger.exception("Could not record a batch of run %s", run.pk)
        unstored = {id(call) for call in new_calls}
        for plan in plans:
            if id(plan.tool_call) in unstored:
                plan.tool_call.pk = None
                plan.result = {
                    "call_id": plan.call_id,
                    "status": "error",
                    "is_error": True,
                    "error": NOT_RECORDED.as_error(),
                }


def _write_in_one_statement(run: Run, plans: list[Planned], new_calls: list[ToolCall], now) -> bool:
    new = {id(call) for call in new_calls}
    try:
        spans = [
            _span_of(run, plan, now)
            for plan in plans
            if plan.tool_call is not None and (plan.tool_call.pk is not None or id(plan.tool_call) in new)
        ]
    except Exception:  # the ordinary path records the calls even when their spans cannot be built
        logger.exception("Could not build the spans of a batch in run %s", run.pk)
        return False
    return batch_write.write(run=run, new_calls=new_calls, spans=spans)


def _waiting(plans: list[Planned]) -> list[Planned]:
    """The calls of the batch that now wait for a person (a replayed one already paused the run)."""
    return [
        p
        for p in plans
        if p.result
        and p.result.get("status") == "approval_required"
        and not (p.tool_call and p.tool_call.decision.get("replay"))
    ]


def _update_run(run: Run, plans: list[Planned]) -> None:
    if run.tainted:
        Run.objects.filter(pk=run.pk, tainted=False).update(
            tainted=True, taint_source=run.taint_source, updated_at=timezone.now()
        )
    if _waiting(plans) and run.status == RunStatus.RUNNING:
        # Pause only while a call still awaits a person: a fast approver may have decided (and the resume
        # settled the run) before this batch commits; runs.lifecycle orders the two under the run's lock.
        lifecycle.pause_if_waiting(run)


def _record_spans(run: Run, plans: list[Planned], now) -> None:
    with recording_spans(f"the spans of a batch in run {run.pk}"):  # losing them must not change the results
        save_spans([_span_of(run, p, now) for p in plans if p.tool_call is not None and p.tool_call.pk is not None])


def _span_of(run: Run, plan: Planned, now) -> Span:
    """The tool_call span of a planned call (unsaved)."""
    call = plan.tool_call
    decision = call.decision or {}
    attributes = {"airlock.run.tainted": bool(run.tainted)}
    if run.agent.presented_key_lookup:  # which of the agent's keys proposed the call (never the secret)
        attributes["airlock.agent.key_lookup"] = run.agent.presented_key_lookup
    for key in ("scope", "reason", "floor", "floor_id", "taint_overridden_by"):
        if decision.get(key):
            attributes[f"airlock.decision.{key}"] = decision[key]
    if any(entry.get("differs") for entry in decision.get("shadow", [])):
        attributes["airlock.decision.shadow_differs"] = True
    refused = decision.get("refused_at_execution")
    if refused:
        attributes.update({"airlock.refused.code": refused["code"], "airlock.refused.reason": refused["reason"]})
    if plan.outcome is not None and plan.outcome.trail is not None:
        attributes.update(plan.outcome.trail.span_attributes())  # attempts, breaker, contract (reliability/)
    if plan.outcome is not None and plan.outcome.error is not None:
        attributes.update(error_span_attributes(plan.outcome.error))  # what the agent got, and why
    return unsaved_span(
        run=run,
        kind="tool_call",
        name=call.name or "unknown",
        started_at=call.started_at or call.created_at,
        ended_at=call.finished_at or now,
        call=call,
        skill_name=call.name,
        skill_version=plan.skill.version if plan.skill else "",
        verdict=call.verdict,
        outcome=call.status,
        error_class=call.error_class,
        attributes=attributes,
    )


__all__ = [
    "GENERIC_INTERNAL",
    "apply_outcome",
    "outcome_status",
    "record_batch",
    "record_execution",
    "refuse_claimed",
    "remember_outcome",
    "settle_after_failure",
]
