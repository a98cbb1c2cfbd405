"""Turning outcomes into agent-facing results, and writing a batch's calls, run state and spans."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from lib.canonical import sha256_of
from registry.snapshots import ResolvedSkill
from runs.errors import GENERIC_INTERNAL
from runs.execution import Outcome
from runs.models import CallStatus, IdempotencyRecord, Run, RunStatus, ToolCall
from runs.shaping import shape

if TYPE_CHECKING:
    from runs.gate import Planned

logger = logging.getLogger(__name__)
RETRYABLE_CLASSES = {"transient", "unavailable", "rate_limited"}


def apply_outcome(*, call: ToolCall, skill: ResolvedSkill, outcome: Outcome, warnings: list[str]) -> dict:
    """Shape the outcome into the contract's result and record it on the call (not saved here)."""
    call.started_at, call.finished_at = outcome.started_at or call.started_at, outcome.finished_at
    tried = len(getattr(outcome.trail, "attempts", None) or ()) or 1  # retries happen in reliability/
    call.attempts = (call.attempts or 0) + tried
    if outcome.error is not None:
        error = outcome.error
        call.status = CallStatus.TIMEOUT_UNKNOWN if error.error_class == "timeout_unknown" else CallStatus.FAILED
        call.error_class = error.error_class
        result = {"call_id": call.call_id, "status": "error", "is_error": True, "error": error.as_error()}
    else:
        shaped = shape(outcome.content, skill.manifest.get("execution", {}).get("result_limit_bytes"))
        call.status, call.error_class = CallStatus.SUCCEEDED, ""
        call.truncated, call.result_bytes = shaped.truncated, shaped.size
        call.result_sha256 = sha256_of(shaped.content)
        result = {"call_id": call.call_id, "status": "ok", "is_error": False, "content": shaped.content,
                  "skill": {"name": skill.name, "version": skill.version}, "truncated": shaped.truncated,
                  "warnings": list(warnings)}
        if getattr(outcome, "provenance", None):  # set by reliability.execution when it cleaned the content
            result["provenance"] = outcome.provenance
        if shaped.truncated:
            result["truncation"] = shaped.truncation
            result["warnings"].append(shaped.truncation["message"])
    call.result = result
    call.sealed_arguments = ""
    return result


def remember_outcome(*, key_record: IdempotencyRecord | None, call: ToolCall, result: dict) -> None:
    """The first final outcome stays with the key; a retryable failure frees the key for a retry."""
    if key_record is None:
        return
    error_class = (result.get("error") or {}).get("class")
    if error_class in RETRYABLE_CLASSES:
        key_record.delete()
    elif error_class != "timeout_unknown":
        IdempotencyRecord.objects.filter(pk=key_record.pk).update(outcome=result)


def record_batch(*, run: Run, plans: list[Planned]) -> None:
    """Persist every call of the batch, the run's taint and status, and one span per call."""
    now = timezone.now()
    new_calls, saved_calls = [], []
    for plan in plans:
        call = plan.tool_call
        if call is None:
            continue
        if call.status != CallStatus.AWAITING_APPROVAL:  # an approval's stored result keeps redacted arguments
            call.result = plan.result
        call.warnings = plan.warnings
        call.finished_at = call.finished_at or (now if call.status != CallStatus.AWAITING_APPROVAL else None)
        (saved_calls if call.pk else new_calls).append(call)
    with transaction.atomic():  # one commit for the batch's outcome and its spans, not one per row
        if new_calls:
            ToolCall.objects.bulk_create(new_calls)
        for call in saved_calls:
            if call.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.EXECUTING):
                call.save()
        for plan in plans:
            if plan.idempotency_record is not None and plan.tool_call is not None:
                remember_outcome(key_record=plan.idempotency_record, call=plan.tool_call, result=plan.result)
        _update_run(run, plans)
        _record_spans(run, plans, now)


def _update_run(run: Run, plans: list[Planned]) -> None:
    fields = {}
    if run.tainted:
        fields.update(tainted=True, taint_source=run.taint_source)
    waiting = [p for p in plans if p.result and p.result.get("status") == "approval_required"
               and not (p.tool_call and p.tool_call.decision.get("replay"))]
    if waiting and run.status == RunStatus.RUNNING:
        # Pause only while a call still awaits a person: a fast approver may have decided (and the resume
        # settled the run) before this batch commits. The run's row lock orders this check with the
        # resume's (approvals.services._resume_run_if_unblocked takes the same lock), so the later of
        # the two sees the other's commit and the run is never left paused with nothing to wait for.
        Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()
        if ToolCall.objects.filter(run=run, status=CallStatus.AWAITING_APPROVAL).exists() and \
                Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                    status=RunStatus.PAUSED, status_reason="waiting on approval", updated_at=timezone.now()):
            run.status, run.status_reason = RunStatus.PAUSED, "waiting on approval"
    if fields:
        Run.objects.filter(pk=run.pk).update(**fields, updated_at=timezone.now())


def _record_spans(run: Run, plans: list[Planned], now) -> None:
    try:
        with transaction.atomic():  # a savepoint inside the batch's transaction: spans fail alone
            _record_span_rows(run, plans, now)
    except Exception:  # a trace is an observation: losing it must not change what the agent gets
        logger.exception("Could not record the spans of a batch in run %s", run.pk)


def _record_span_rows(run: Run, plans: list[Planned], now) -> None:
    from traces.recording import record_span

    for plan in plans:
        call = plan.tool_call
        if call is None or call.pk is None:
            continue
        decision = call.decision or {}
        attributes = {"airlock.run.tainted": bool(run.tainted)}
        for key in ("scope", "reason", "floor"):
            if decision.get(key):
                attributes[f"airlock.decision.{key}"] = decision[key]
        if any(entry.get("differs") for entry in decision.get("shadow", [])):
            attributes["airlock.decision.shadow_differs"] = True
        if plan.outcome is not None and plan.outcome.trail is not None:
            attributes.update(plan.outcome.trail.span_attributes())  # attempts, breaker, contract (reliability/)
        record_span(run=run, kind="tool_call", name=call.name or "unknown", started_at=call.started_at
                    or call.created_at, ended_at=call.finished_at or now, call=call, skill_name=call.name,
                    skill_version=plan.skill.version if plan.skill else "", verdict=call.verdict,
                    outcome=call.status, error_class=call.error_class, attributes=attributes)


__all__ = ["GENERIC_INTERNAL", "apply_outcome", "record_batch", "remember_outcome"]
