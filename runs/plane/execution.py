"""The execution plane around one adapter call: the only place that retries.

`runs.execution` calls three hooks:
- `prepare(...)` in the caller's thread before the call is submitted: credentials and MCP server
  settings are read from the database here (adapter threads never touch it);
- `invoke(...)` in the adapter thread: circuit breaker, attempts with backoff and jitter within
  `max_attempts` and the call's deadline, timeouts and resets of writes turned into
  `timeout_unknown`, long-running job detection;
- `finish(...)` in the caller's thread once the call is over: contract check, result hygiene and
  provenance, attempt spans, breaker transitions and owner alerts, reconciliation items, jobs.
"""

from __future__ import annotations

import logging
import random
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airlock_sdk import fencing
from django.conf import settings
from django.utils import timezone

from lib import clock
from runs import hooks
from runs.errors import GENERIC_INTERNAL, CallError, Internal, TimeoutUnknown, internal_from
from runs.plane import aftermath, breakers, contracts, credentials, downstream_errors, tool_pins
from runs.plane.mcp_servers import connection_for, owning_team

if TYPE_CHECKING:
    from runs.adapters import Adapter, InvocationContext
    from runs.execution import Outcome

logger = logging.getLogger(__name__)
READ_EFFECTS = frozenset({"read"})
MIN_ATTEMPT_S = 0.05
TIMEOUT_CODES = frozenset({"downstream_timeout", "timeout"})
RESET_CODES = frozenset({"connection_reset"})
RETRYABLE_UNAVAILABLE = frozenset({"downstream_unreachable"})
NOT_BREAKER_FAILURES = frozenset(
    {"circuit_open", "circuit_half_open", "credential_missing", "no_adapter", "no_function", "unknown_server"}
)
UNKNOWN_OUTCOME = (
    "The call did not finish cleanly and its outcome is unknown; do not repeat this call. Airlock "
    "opened a reconciliation item and reports the outcome on the run when it is known."
)

_current: ContextVar[Trail | None] = ContextVar("airlock_execution_trail", default=None)


@dataclass
class AttemptRecord:
    number: int
    started_at: datetime
    ended_at: datetime | None = None
    error_class: str = ""
    code: str = ""
    retry_in_s: float | None = None
    breaker: str = breakers.CLOSED
    probe: bool = False


@dataclass
class Trail:
    """What one execution needs and leaves behind, besides content and error (kept on the Outcome)."""

    skill: str
    version: str
    adapter: str
    effect: str
    idempotent: bool
    max_attempts: int
    domain: str
    tenant: str
    run_id: str
    call_id: str
    idempotency_key: str
    untrusted: bool = False
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    mcp: dict | None = field(default=None, repr=False)
    mcp_served: tuple | None = field(default=None, repr=False)  # (server, tool, definition) the server listed
    error: CallError | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    transitions: list[breakers.Transition] = field(default_factory=list)
    outcome_unknown: bool = False
    job: dict | None = None
    contract_violation: str = ""
    undeclared_error_code: str = ""
    finished: bool = False
    trial: bool = False

    @property
    def may_retry(self) -> bool:
        return self.effect in READ_EFFECTS or self.idempotent

    @property
    def uses_breaker(self) -> bool:
        # A try must not open (or close) the circuit that agents' calls of the same service go through.
        return not self.trial and not self.adapter.startswith(("python:", "client:"))

    def span_attributes(self) -> dict[str, Any]:
        """What the call's own span shows of its execution: attempts, breaker, contract."""
        attributes: dict[str, Any] = {"airlock.attempts": len(self.attempts)} if self.attempts else {}
        if self.uses_breaker and self.attempts:
            attributes["airlock.breaker.domain"] = self.domain
            attributes["airlock.breaker.state"] = self.attempts[-1].breaker
        if self.contract_violation:
            attributes["airlock.contract_violation"] = self.contract_violation
        if self.undeclared_error_code:
            attributes["airlock.error.undeclared_code"] = self.undeclared_error_code
        return attributes

    def keep_served(self, server, tool: str, definition: dict | None) -> None:
        self.mcp_served = (server, tool, definition)


def current_trail() -> Trail | None:
    return _current.get()


def retry_config() -> dict:
    return {"base_s": settings.AIRLOCK_RETRY_BASE_SECONDS, "cap_s": settings.AIRLOCK_RETRY_CAP_SECONDS}


def prepare(*, manifest: dict, context: InvocationContext) -> Trail:
    execution = manifest.get("execution", {})
    adapter = str(execution.get("adapter", ""))
    trail = Trail(
        skill=manifest.get("name", ""),
        version=manifest.get("version", ""),
        adapter=adapter,
        effect=manifest.get("risk", {}).get("effect", "read"),
        idempotent=bool(execution.get("idempotent")),
        max_attempts=max(1, int(execution.get("max_attempts") or 1)),
        domain=breakers.domain_for(
            adapter, tenant=context.tenant, tenant_specific=bool(credentials.credential_name(manifest))
        ),
        tenant=context.tenant,
        run_id=context.run_id,
        call_id=context.call_id,
        idempotency_key=context.idempotency_key,
        untrusted=bool(manifest.get("risk", {}).get("untrusted_output")),
        trial=context.trial,
    )
    try:
        trail.headers = credentials.resolve_headers(
            manifest=manifest, tenant_slug=context.tenant, end_user=context.end_user
        )
        if execution.get("job_status"):
            trail.headers["X-Airlock-Callback"] = hooks.job_callback_url(context.run_id, context.call_id)
        if adapter.startswith("mcp://"):
            trail.mcp = connection_for(adapter, team=owning_team(manifest))
    except CallError as exc:
        trail.error = exc
    except Exception as exc:
        logger.exception("Could not prepare the execution of %s", trail.skill)
        trail.error = internal_from(exc)
    return trail


def invoke(adapter: Adapter, *, manifest: dict, arguments: dict, context: InvocationContext, outcome: Outcome) -> Any:
    """Run the call's attempts in this (adapter) thread; the content, or raise the final CallError."""
    trail: Trail | None = getattr(outcome, "trail", None)
    if trail is None:
        return adapter.invoke(manifest=manifest, arguments=arguments, context=context).content
    if trail.error is not None:
        raise trail.error
    token = _current.set(trail)
    try:
        return _attempts(adapter, manifest, arguments, context, trail)
    finally:
        _current.reset(token)


def _attempts(adapter: Adapter, manifest: dict, arguments: dict, context: InvocationContext, trail: Trail) -> Any:
    deadline = clock.monotonic() + context.timeout_s
    while True:
        record = AttemptRecord(number=len(trail.attempts) + 1, started_at=timezone.now())
        trail.attempts.append(record)
        admission = breakers.Admission(breakers.CLOSED, probe=False)
        try:
            if trail.uses_breaker:
                admission = breakers.admit(trail.domain)
            record.breaker, record.probe = admission.state, admission.probe
            attempt_context = replace(context, timeout_s=max(deadline - clock.monotonic(), MIN_ATTEMPT_S))
            result = adapter.invoke(manifest=manifest, arguments=arguments, context=attempt_context)
        except CallError as exc:
            _close(record, exc)
            if exc.code in ("circuit_open", "circuit_half_open"):
                record.breaker = breakers.state_of(trail.domain)
                raise _final(exc, trail) from None
            if trail.effect not in READ_EFFECTS and exc.code in TIMEOUT_CODES | RESET_CODES:
                trail.outcome_unknown = True
            _note_breaker(trail, admission, exc)
            delay = retry_delay(exc, attempt=record.number, trail=trail, deadline=deadline)
            if delay is None:
                raise _final(exc, trail) from exc
            record.retry_in_s = round(delay, 3)
            clock.sleep(delay)
            continue
        except Exception:
            _close(record, Internal(GENERIC_INTERNAL))
            if admission.probe:
                trail.transitions += breakers.record_failure(trail.domain, admission, reason="internal error")
            raise
        record.ended_at = timezone.now()
        if trail.uses_breaker:
            trail.transitions += breakers.record_success(trail.domain, admission)
        trail.job = job_of(result, manifest)
        return result.content


def _close(record: AttemptRecord, error: CallError) -> None:
    record.ended_at, record.error_class, record.code = timezone.now(), error.error_class, error.code


def _note_breaker(trail: Trail, admission: breakers.Admission, error: CallError) -> None:
    if not trail.uses_breaker:
        return
    if breaker_failure(error):
        trail.transitions += breakers.record_failure(trail.domain, admission, reason=error.code)
    else:  # the service answered (a validation error, a 404, a 429): it is up
        trail.transitions += breakers.record_success(trail.domain, admission)


def breaker_failure(error: CallError) -> bool:
    return (
        error.error_class in ("transient", "unavailable", "timeout_unknown") and error.code not in NOT_BREAKER_FAILURES
    )


def is_transient(error: CallError) -> bool:
    """Only these are retried: timeouts and resets, 502/503/504, 429, an unreachable service."""
    if error.error_class in ("transient", "rate_limited"):
        return error.code not in ("in_progress",)
    return error.error_class == "unavailable" and error.code in RETRYABLE_UNAVAILABLE


def retry_delay(error: CallError, *, attempt: int, trail: Trail, deadline: float) -> float | None:
    """Seconds to wait before the next attempt, or None when this error must be the answer."""
    if attempt >= trail.max_attempts or not trail.may_retry or not is_transient(error):
        return None
    config = retry_config()
    backoff = min(config["cap_s"], config["base_s"] * 2 ** (attempt - 1))
    delay = backoff / 2 + random.uniform(0, backoff / 2)  # equal jitter: never zero, never in lockstep
    retry_after = error.extra.get("retry_after")
    if retry_after and error.code != "timeout":
        delay = max(delay, float(retry_after))
    if clock.monotonic() + delay + MIN_ATTEMPT_S > deadline:
        return None
    return delay


def _final(error: CallError, trail: Trail) -> CallError:
    if trail.outcome_unknown:
        return TimeoutUnknown(UNKNOWN_OUTCOME, code="timeout_unknown")
    return error


def job_of(result: Any, manifest: dict) -> dict | None:
    """A long-running skill answers 202 (or declares `execution.job_status`) with a job id."""
    content = result.content
    if not isinstance(content, dict) or not isinstance(content.get("job_id"), str | int):
        return None
    declared = bool(manifest.get("execution", {}).get("job_status"))
    if result.metadata.get("http_status") == 202 or (
        declared and content.get("status") in ("pending", "running", "accepted")
    ):
        return {"job_id": str(content["job_id"])}
    return None


def finish(outcome: Outcome, *, manifest: dict, effect: str) -> Outcome:
    """After the call (caller's thread): shape checks and everything that writes rows or sends mail."""
    trail: Trail | None = getattr(outcome, "trail", None)
    if trail is None or trail.finished:
        return outcome
    trail.finished = True
    if trail.mcp_served is not None:  # kept here, in the caller's thread: the pin or a change for review
        tool_pins.record(*trail.mcp_served)
    if outcome.error is None and trail.job is None:
        _check_result(outcome, trail, manifest)
    elif outcome.error is not None:
        trail.undeclared_error_code = downstream_errors.with_declared_meaning(outcome.error, manifest.get("errors"))
    if trail.trial:  # no run or call to hang spans, reconciliations or jobs on; owners see the try itself
        return outcome
    try:
        aftermath.record_aftermath(outcome=outcome, trail=trail, manifest=manifest)
    except Exception:  # observation and follow-up must not change what the agent gets
        logger.exception("Could not record the aftermath of %s in run %s", trail.skill, trail.run_id)
    return outcome


def _check_result(outcome: Outcome, trail: Trail, manifest: dict) -> None:
    problem = contracts.violation(outcome.content, manifest.get("output_schema"))
    if problem:
        trail.contract_violation = problem
        outcome.content, outcome.error = None, Internal(contracts.UNEXPECTED_SHAPE, code="contract_violation")
        return
    cleaned = fencing.clean(outcome.content)
    outcome.content = cleaned.content
    outcome.provenance = fencing.provenance(
        skill=trail.skill,
        version=trail.version,
        adapter=trail.adapter,
        untrusted=trail.untrusted,
        removed=cleaned.removed,
    )
