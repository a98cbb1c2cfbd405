"""What an execution leaves behind, written in the caller's thread: attempt spans, breaker
transitions and their alerts, contract-violation alerts, reconciliation items and long-running jobs."""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING

from django.db import transaction

from registry.notifications import notify_owners
from runs import hooks
from runs.models import Run, ToolCall
from runs.plane import breakers
from runs.plane.models import BreakerTransition
from traces.recording import record_span, recording_spans

if TYPE_CHECKING:
    from runs.execution import Outcome
    from runs.plane.execution import Trail

logger = logging.getLogger(__name__)


class _Rows:
    """The run and call rows, loaded only when something needs them."""

    def __init__(self, trail: Trail) -> None:
        self.trail = trail

    @cached_property
    def run(self):
        return Run.objects.select_related("tenant").get(pk=self.trail.run_id)

    @cached_property
    def call(self):
        return ToolCall.objects.filter(run_id=self.trail.run_id, call_id=self.trail.call_id).first()


def record_aftermath(*, outcome: Outcome, trail: Trail, manifest: dict) -> None:
    rows = _Rows(trail)
    error = outcome.error
    if _worth_spans(trail, error):
        with recording_spans(f"the attempt spans of {trail.skill}"):
            _record_attempt_spans(rows, trail)
    if trail.transitions:
        with transaction.atomic():  # a savepoint, and only when there is something to write: a failure
            for transition in trail.transitions:  # leaves the caller's transaction usable
                _record_transition(rows, trail, transition)
    if trail.contract_violation:
        notify_owners(
            skill_name=trail.skill,
            dedupe_key=f"contract:{trail.skill}:{trail.version}",
            subject=f"{trail.skill} {trail.version} returned a result that breaks its output_schema",
            body=f"Where: {trail.contract_violation}\nRun: {trail.run_id}, call {trail.call_id}.\n"
            "The agent got an internal error instead of the result.",
        )
    if trail.undeclared_error_code:
        notify_owners(
            skill_name=trail.skill,
            dedupe_key=f"undeclared-error:{trail.skill}:{trail.version}:{trail.undeclared_error_code}",
            subject=f"{trail.skill} {trail.version} returned the undeclared error code {trail.undeclared_error_code}",
            body=f"Run: {trail.run_id}, call {trail.call_id}.\nDeclare it in the manifest's errors (code, meaning, "
            "retryable) so the agent knows what it means and whether retrying can help.",
        )
    if error is not None and error.error_class == "timeout_unknown" and rows.call is not None:
        with transaction.atomic():
            hooks.open_reconciliation(call=rows.call, reason="timeout")
    if trail.job is not None and error is None:
        outcome.content = hooks.register_job(
            run=rows.run, call_id=trail.call_id, skill=trail.skill, job_id=trail.job["job_id"]
        )


def _worth_spans(trail: Trail, error) -> bool:
    """A single clean attempt is the call's own span; anything else gets one span per attempt."""
    return (
        len(trail.attempts) > 1
        or error is not None
        or bool(trail.contract_violation)
        or any(a.breaker != breakers.CLOSED or a.error_class for a in trail.attempts)
    )


def _record_attempt_spans(rows: _Rows, trail: Trail) -> None:
    breaker = breakers.snapshot(trail.domain) if trail.uses_breaker else None
    for attempt in trail.attempts:
        attributes = {
            "airlock.attempt": attempt.number,
            "airlock.attempts.max": trail.max_attempts,
            "gen_ai.tool.call.id": trail.call_id,
            "airlock.effect": trail.effect,
        }
        if breaker is not None:
            attributes.update(
                {
                    "airlock.breaker.domain": trail.domain,
                    "airlock.breaker.state": attempt.breaker,
                    "airlock.breaker.probe": attempt.probe,
                    "airlock.breaker.state_now": breaker["state"],
                }
            )
        if attempt.code:
            attributes["airlock.error.code"] = attempt.code
        if attempt.retry_in_s is not None:
            attributes["airlock.retry.in_s"] = attempt.retry_in_s
        outcome = "failed" if attempt.error_class else "succeeded"
        if trail.contract_violation and attempt is trail.attempts[-1]:
            outcome, attributes["airlock.contract_violation"] = "contract_violation", trail.contract_violation
        record_span(
            run=rows.run,
            kind="execution_attempt",
            name=f"{trail.skill} attempt {attempt.number}",
            started_at=attempt.started_at,
            ended_at=attempt.ended_at or attempt.started_at,
            call=rows.call,
            skill_name=trail.skill,
            skill_version=trail.version,
            outcome=outcome,
            error_class=attempt.error_class,
            attributes=attributes,
        )


def _record_transition(rows: _Rows, trail: Trail, transition: breakers.Transition) -> None:
    tenant = rows.run.tenant if "|tenant=" in transition.domain else None
    BreakerTransition.objects.create(
        domain=transition.domain,
        skill_name=trail.skill,
        tenant=tenant,
        from_state=transition.from_state,
        to_state=transition.to_state,
        detail=transition.detail[:300],
    )
    notify_owners(
        skill_name=trail.skill,
        subject=f"circuit {transition.to_state.replace('_', '-')} for {transition.domain}",
        body=f"The circuit breaker for {transition.domain} went from {transition.from_state} to "
        f"{transition.to_state} ({transition.detail}) on a call of {trail.skill}.",
    )
