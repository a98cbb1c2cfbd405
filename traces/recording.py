"""The one recording API every app uses to put steps of a run on its trace.

`record_span` is on the gate's hot path: one insert and one counter update, nothing read back.
A run's trace id is the run's UUID in hex, so an agent that knows its run id also knows the trace
id to use in its own OpenTelemetry spans (they then land on the same timeline).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from traces.cost import span_attributes as cost_span_attributes
from traces.models import Span, Trace
from traces.redaction import redact, redact_text

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from runs.models import Run, ToolCall

_TRACE_CACHE_ATTR = "_airlock_trace"
# gen_ai.operation.name per span kind (OpenTelemetry GenAI semantic conventions).
GEN_AI_OPERATION = {"tool_call": "execute_tool", "model_turn": "chat", "run": "invoke_agent"}


def new_span_id() -> str:
    return secrets.token_hex(8)


def new_trace_id() -> str:
    return secrets.token_hex(16)


def trace_id_for_run(run: Run) -> str:
    return run.id.hex


def ensure_trace(run: Run) -> Trace:
    """The run's trace, created on first use. A trace the agent opened through ingest with the
    same trace id is adopted, so spans sent before the run's first call are not orphaned."""
    cached = getattr(run, _TRACE_CACHE_ATTR, None)
    if cached is not None:
        return cached
    trace = Trace.objects.filter(run_id=run.pk).first()
    if trace is None:
        trace = _create_or_adopt(run)
    setattr(run, _TRACE_CACHE_ATTR, trace)
    return trace


def start_trace(run: Run) -> Trace:
    """The trace of a run created in this transaction. Its trace id is the new run's random id, which no
    agent could have known to open through ingest: one INSERT, none of `ensure_trace`'s adoption."""
    trace = Trace.objects.create(tenant_id=run.tenant_id, trace_id=trace_id_for_run(run), **_trace_fields(run))
    setattr(run, _TRACE_CACHE_ATTR, trace)
    return trace


def adopt_trace(run: Run, trace_pk: int) -> None:
    """Tell `ensure_trace` the run's trace id, read by the caller with the run: it skips its lookup."""
    setattr(run, _TRACE_CACHE_ATTR, Trace(pk=trace_pk, tenant_id=run.tenant_id, run_id=run.pk))


def _trace_fields(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.pk,
        "agent_id": run.agent_id,
        "end_user": run.end_user,
        "name": redact_text(run.task or "run", limit=300),
        "started_at": run.created_at,
    }


def _create_or_adopt(run: Run) -> Trace:
    trace_id = trace_id_for_run(run)
    fields = _trace_fields(run)
    try:
        with transaction.atomic():
            trace, created = Trace.objects.get_or_create(tenant_id=run.tenant_id, trace_id=trace_id, defaults=fields)
    except IntegrityError:  # a concurrent first span of the same run won the race
        trace = Trace.objects.get(tenant_id=run.tenant_id, trace_id=trace_id)
        created = True
    if not created and trace.run_id is None:
        Trace.objects.filter(pk=trace.pk).update(**fields)
        for key, value in fields.items():
            setattr(trace, key, value)
    return trace


def _call_attributes(call: ToolCall) -> dict[str, Any]:
    decision = call.decision or {}
    attrs: dict[str, Any] = {
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.call_id,
        "airlock.call.status": call.status,
        "airlock.arguments.sha256": call.arguments_sha256,
        "airlock.effect": call.effect,
    }
    if call.result_sha256:
        attrs["airlock.result.sha256"] = call.result_sha256
        attrs["airlock.result.bytes"] = call.result_bytes
        attrs["airlock.result.truncated"] = call.truncated
        attrs["airlock.result.tokens"] = call.result_tokens
        attrs["airlock.result.encoding"] = (decision.get("model_view") or {}).get("encoding")
    adapter = decision.get("adapter") or {}
    if adapter.get("name"):
        attrs["airlock.adapter"] = adapter["name"]
        attrs["airlock.adapter.version"] = adapter.get("version")
    attrs.update(cost_span_attributes(decision.get("cost")))
    if call.attempts:
        attrs["airlock.attempts"] = call.attempts
    if decision.get("rule_id") or decision.get("rule"):
        attrs["airlock.decision.rule"] = decision.get("rule_id") or decision.get("rule")
    if decision.get("policy_version") is not None:
        attrs["airlock.decision.policy_version"] = decision.get("policy_version")
    return {key: value for key, value in attrs.items() if value not in ("", None)}


def verdict_attributes(
    verdict: str, *, rule: str = "", reason: str = "", policy_version: Any = None, call_id: str = ""
) -> dict[str, Any]:
    """A verdict in the GenAI security-guardian vocabulary (`apply_guardrail`, gen_ai.security.*),
    beside Airlock's own attributes. The conventions have no "ask a human": confirm is a `warn`
    with decision code `approval_required`."""
    decision_type = {"allow": "allow", "confirm": "warn", "deny": "deny"}.get(verdict, verdict)
    attrs: dict[str, Any] = {
        "airlock.verdict": verdict,
        "gen_ai.guardian.name": "airlock.policy",
        "gen_ai.security.target.type": "tool_call",
        "gen_ai.security.decision.type": decision_type,
    }
    if verdict == "confirm":
        attrs["gen_ai.security.decision.code"] = "approval_required"
    if call_id:
        attrs["gen_ai.security.target.id"] = call_id
    if rule:
        attrs["airlock.decision.rule"] = rule
        attrs["gen_ai.security.policy.id"] = rule
    if policy_version not in (None, ""):
        attrs["gen_ai.security.policy.version"] = str(policy_version)
    if reason or rule:
        attrs["gen_ai.security.decision.reason"] = reason or f"rule {rule}"
    return attrs


@contextmanager
def recording_spans(what: str) -> Iterator[None]:
    """Record spans in their own savepoint: a failure rolls back only the spans and is logged, never
    raised, and the caller's transaction stays usable. A trace is evidence, not a precondition."""
    try:
        with transaction.atomic():
            yield
    except Exception:
        logger.exception("Could not record %s", what)


def record_span_safely(*, what: str = "a span", **fields: Any) -> Span | None:
    """`record_span` for callers whose work is already recorded elsewhere: never fails them."""
    with recording_spans(what):
        return record_span(**fields)
    return None


def record_span(**fields: Any) -> Span:
    """Append one span to the run's trace (the arguments are `unsaved_span`'s). Its name and attribute
    payloads are redacted before storage."""
    span = unsaved_span(**fields)
    save_spans([span])
    return span


def save_spans(spans: list[Span]) -> None:
    """Store spans of one trace built by `unsaved_span` (one INSERT) and count them in it (one UPDATE)."""
    if not spans:
        return
    if len(spans) == 1:
        spans[0].save(force_insert=True)  # the row's id, for callers that keep the span
    else:
        Span.objects.bulk_create(spans)
    _bump_counters(spans[0].trace, **counter_deltas(spans))


def unsaved_span(
    *,
    run: Run,
    kind: str,
    name: str,
    started_at: datetime,
    ended_at: datetime | None = None,
    parent_span_id: str = "",
    call: ToolCall | None = None,
    skill_name: str = "",
    skill_version: str = "",
    verdict: str = "",
    outcome: str = "",
    error_class: str = "",
    attributes: dict[str, Any] | None = None,
) -> Span:
    """The span `record_span` stores, built but not saved: `save_spans` stores it, or a writer that stores
    several spans in one statement (runs/batch_write.py) with `counter_deltas` for the trace."""
    trace = ensure_trace(run)
    attrs: dict[str, Any] = {}
    if kind in GEN_AI_OPERATION:
        attrs["gen_ai.operation.name"] = GEN_AI_OPERATION[kind]
    if call is not None:
        attrs.update(_call_attributes(call))
        skill_name = skill_name or call.name
    if verdict:
        attrs.update(
            verdict_attributes(
                verdict,
                rule=str(attrs.get("airlock.decision.rule", "")),
                call_id=call.call_id if call else "",
                policy_version=attrs.get("airlock.decision.policy_version"),
            )
        )
    if attributes:
        attrs.update(attributes)
    attrs = redact(attrs)
    duration_ms = (ended_at - started_at).total_seconds() * 1000 if ended_at else None
    return Span(
        trace=trace,
        span_id=new_span_id(),
        parent_span_id=parent_span_id or "",
        kind=kind,
        name=redact_text(name, limit=300),
        started_at=started_at,
        ended_at=ended_at,
        duration_ms=duration_ms,
        skill_name=skill_name,
        skill_version=skill_version,
        call=call,
        verdict=verdict,
        outcome=outcome,
        error_class=error_class,
        attributes=attrs,
        arguments_sha256=str(attrs.get("airlock.arguments.sha256", ""))[:64],
        result_bytes=_int_or_zero(attrs.get("airlock.result.bytes")),
    )


def counter_deltas(spans: list[Span]) -> dict[str, Any]:
    """How new spans move their trace's counters: count, errors, earliest start, latest end."""
    return {
        "spans": len(spans),
        "errors": sum(1 for span in spans if span.error_class),
        "started_at": min(span.started_at for span in spans),
        "ended_at": max(span.ended_at or span.started_at for span in spans),
    }


def _int_or_zero(value: Any) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def _bump_counters(
    trace: Trace, *, spans: int, errors: int, ended_at: datetime | None, started_at: datetime | None = None
) -> None:
    sql, params = trace_counter_update(
        connection, trace.pk, {"spans": spans, "errors": errors, "started_at": started_at, "ended_at": ended_at}
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def trace_counter_update(db, trace_pk: int, deltas: dict[str, Any]) -> tuple[str, list[Any]]:
    """How new spans move their trace's counters, as one UPDATE's text and parameters: the count, the
    errors, an earlier start (a span the agent recorded before the run began moves it back) and a later
    end. Also usable inside a larger statement (runs/batch_write.py)."""
    q = db.ops.quote_name
    spans, errors, started, ended = q("span_count"), q("error_count"), q("started_at"), q("ended_at")
    assignments = [f"{spans} = {spans} + %s", f"{errors} = {errors} + %s"]
    params: list[Any] = [deltas["spans"], deltas["errors"]]
    if deltas.get("started_at") is not None:
        started_at = db.ops.adapt_datetimefield_value(deltas["started_at"])
        assignments.append(f"{started} = CASE WHEN {started} > %s THEN %s ELSE {started} END")
        params += [started_at, started_at]
    if deltas.get("ended_at") is not None:
        # Only forward; spelled out because GREATEST treats NULL differently on SQLite and PostgreSQL.
        ended_at = db.ops.adapt_datetimefield_value(deltas["ended_at"])
        assignments.append(f"{ended} = CASE WHEN {ended} IS NULL OR {ended} < %s THEN %s ELSE {ended} END")
        params += [ended_at, ended_at]
    sql = f"UPDATE {q(Trace._meta.db_table)} SET {', '.join(assignments)} WHERE {q(Trace._meta.pk.column)} = %s"
    return sql, [*params, trace_pk]


def finish_span(
    span: Span,
    *,
    ended_at: datetime | None = None,
    outcome: str = "",
    error_class: str = "",
    attributes: dict[str, Any] | None = None,
) -> Span:
    """Close a span opened without an end (an approval wait, an execution attempt)."""
    ended_at = ended_at or timezone.now()
    span.ended_at = ended_at
    span.duration_ms = (ended_at - span.started_at).total_seconds() * 1000
    fields = ["ended_at", "duration_ms"]
    if outcome:
        span.outcome = outcome
        fields.append("outcome")
    if error_class:
        span.error_class = error_class
        fields.append("error_class")
    if attributes:
        span.attributes = {**span.attributes, **redact(attributes)}
        fields.append("attributes")
    span.save(update_fields=fields)
    _bump_counters(span.trace, spans=0, errors=1 if error_class else 0, ended_at=ended_at)
    return span


__all__ = [
    "adopt_trace",
    "counter_deltas",
    "ensure_trace",
    "finish_span",
    "new_span_id",
    "new_trace_id",
    "record_span",
    "record_span_safely",
    "recording_spans",
    "save_spans",
    "trace_counter_update",
    "trace_id_for_run",
    "unsaved_span",
    "verdict_attributes",
]
