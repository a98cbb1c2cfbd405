"""Storing spans agents send (batch JSON and OTLP): validate everything, then write in bulk.

A request is accepted whole or refused whole: every span is checked before the first row is
written, and the writes run in one transaction. Writes are idempotent on (trace id, span id), so a
retried batch stores nothing twice; OTLP clients retry, and duplicates are normal.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import threading
import time
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Case, F, Q, Value, When

from console.models import Agent
from lib import bounded_json
from registry.models import SkillVersion
from traces import hooks
from traces.models import Span, SpanKind, Trace
from traces.redaction import redact, redact_text

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
PAYLOAD_KEYS = {"gen_ai.tool.call.arguments": "input_schema", "gen_ai.tool.call.result": "output_schema"}
MIN_TIME = datetime(2000, 1, 1, tzinfo=UTC)
_CHUNK = 500


class IngestError(Exception):
    """Refuses a whole request; `status` and `code` go to the client as they are."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: int | None = None, error_class: str = "validation"
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.error_class = retry_after, error_class


@dataclass
class SpanIn:
    """One span, decoded from either wire format, not yet checked."""

    trace_id: str
    span_id: str
    name: str
    started_at: datetime
    ended_at: datetime | None = None
    parent_span_id: str = ""
    kind: str = SpanKind.OTHER
    skill_name: str = ""
    skill_version: str = ""
    call_id: str = ""
    verdict: str = ""
    outcome: str = ""
    error_class: str = ""
    end_user: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class IngestResult:
    received: int
    stored: int
    traces: list[str]

    @property
    def duplicates(self) -> int:
        return self.received - self.stored


# --- reading the body -------------------------------------------------------------------------


def read_body(request: Any) -> bytes:
    """The request body, gunzipped, refused with 413 past the configured limits (checked before
    reading, and again while inflating, so a small gzip bomb cannot blow up memory)."""
    max_wire = settings.TRACES_INGEST_MAX_BODY_BYTES
    max_decoded = settings.TRACES_INGEST_MAX_DECODED_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        declared_len = int(declared)
    except ValueError:
        raise IngestError(400, "bad_content_length", "Content-Length is not a number.") from None
    if declared_len > max_wire:
        raise IngestError(413, "body_too_large", f"The body is {declared_len} bytes; the limit is {max_wire}.")
    raw = request.read(max_wire + 1)
    if len(raw) > max_wire:
        raise IngestError(413, "body_too_large", f"The body is over the limit of {max_wire} bytes.")
    encoding = (request.META.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise IngestError(415, "unsupported_encoding", f"Content-Encoding {encoding!r} is not supported; use gzip.")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = inflater.decompress(raw, max_decoded + 1)
    except zlib.error as exc:
        raise IngestError(400, "bad_gzip", f"The gzip body could not be inflated: {exc}.") from None
    if len(body) > max_decoded or inflater.unconsumed_tail:
        raise IngestError(413, "body_too_large", f"The inflated body is over the limit of {max_decoded} bytes.")
    return body


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=5)


# --- capacity ---------------------------------------------------------------------------------

_inflight_lock = threading.Lock()
_inflight = 0


@contextmanager
def capacity_slot():
    """Bound concurrent ingest work per process: past the bound, answer 503 with Retry-After
    instead of queueing requests without limit (OTLP clients back off and retry)."""
    global _inflight
    bound = settings.TRACES_INGEST_MAX_INFLIGHT
    with _inflight_lock:
        if _inflight >= bound:
            raise IngestError(
                503,
                "over_capacity",
                "Trace ingest is at capacity; retry later.",
                retry_after=2,
                error_class="unavailable",
            )
        _inflight += 1
    try:
        yield
    finally:
        with _inflight_lock:
            _inflight -= 1


def charge_rate(*, tenant_id: int, spans: int) -> None:
    """Per-tenant spans per minute (shared through the cache): 429 with the seconds left in the minute."""
    per_minute = settings.TRACES_INGEST_SPANS_PER_MINUTE
    now = time.time()
    key = f"traces:ingest:{tenant_id}:{int(now // 60)}"
    cache.add(key, 0, timeout=120)
    try:
        used = cache.incr(key, spans)
    except ValueError:  # evicted between add and incr
        cache.set(key, spans, timeout=120)
        used = spans
    if used > per_minute:
        wait = max(1, int(60 - now % 60))
        raise IngestError(
            429,
            "rate_limited",
            f"This tenant sent more than {per_minute} spans this minute.",
            retry_after=wait,
            error_class="rate_limited",
        )


# --- checking and storing ---------------------------------------------------------------------


def _check(spans: list[SpanIn]) -> None:
    max_spans = settings.TRACES_INGEST_MAX_SPANS
    max_attr = settings.TRACES_INGEST_MAX_ATTRIBUTE_BYTES
    if not spans:
        raise IngestError(400, "no_spans", "The request holds no spans.")
    if len(spans) > max_spans:
        raise IngestError(413, "too_many_spans", f"The request holds {len(spans)} spans; the limit is {max_spans}.")
    kinds = set(SpanKind.values)
    for index, span in enumerate(spans):
        where = f"spans[{index}]"
        if not HEX32.match(span.trace_id) or span.trace_id == "0" * 32:
            raise IngestError(400, "bad_trace_id", f"{where}.trace_id must be 32 hex characters, not all zero.")
        if not HEX16.match(span.span_id) or span.span_id == "0" * 16:
            raise IngestError(400, "bad_span_id", f"{where}.span_id must be 16 hex characters, not all zero.")
        if span.parent_span_id and not HEX16.match(span.parent_span_id):
            raise IngestError(400, "bad_parent_span_id", f"{where}.parent_span_id must be empty or 16 hex characters.")
        if not span.name:
            raise IngestError(400, "missing_name", f"{where}.name is required.")
        if span.kind not in kinds:
            raise IngestError(400, "bad_kind", f"{where}.kind must be one of {', '.join(sorted(kinds))}.")
        if span.started_at < MIN_TIME:
            raise IngestError(400, "bad_start_time", f"{where} starts before the year 2000; is the clock unset?")
        if span.ended_at is not None and span.ended_at < span.started_at:
            raise IngestError(400, "ends_before_start", f"{where} ends before it starts.")
        size = len(json.dumps(span.attributes, default=str))
        if size > max_attr:
            raise IngestError(
                413,
                "attributes_too_large",
                f"{where}.attributes is {size} bytes of JSON; the limit per span is {max_attr}.",
            )


def _skill_payload_rules(names: set[str]) -> dict[tuple[str, str], tuple[dict, str]]:
    """(skill, version) → (manifest, data classification), with (skill, "") for the newest version."""
    if not names:
        return {}

    rules: dict[tuple[str, str], tuple[dict, str]] = {}
    rows = (
        SkillVersion.objects.filter(skill__name__in=names)
        .exclude(status="draft")
        .order_by("skill__name", "major", "minor", "patch")
        .values_list("skill__name", "version", "manifest", "data_classification")
    )
    for name, version, manifest, classification in rows:
        rules[(name, version)] = rules[(name, "")] = (manifest or {}, classification or "internal")
    return rules


def _parse_maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return bounded_json.loads(value)
        except ValueError:
            return value
    return value


def redact_span_attributes(attributes: dict[str, Any], rule: tuple[dict, str] | None) -> dict[str, Any]:
    """Secrets are masked everywhere (payloads sent as JSON text are parsed first, so credential keys
    inside them are seen); a known skill's argument and result payloads also follow its schema and
    classification, the same rules the gate applies."""
    if not any(key in PAYLOAD_KEYS for key in attributes):
        return redact(attributes)
    manifest, classification = rule if rule is not None else ({}, "internal")
    out = {}
    for key, value in attributes.items():
        schema_key = PAYLOAD_KEYS.get(key)
        if schema_key is None:
            out.update(redact({key: value}))
        else:
            out[key] = redact(
                _parse_maybe_json(value), schema=manifest.get(schema_key), data_classification=classification
            )
    return out


def _resolve_traces(agent: Agent, spans: list[SpanIn]) -> dict[str, Trace]:
    first: dict[str, SpanIn] = {}
    for span in spans:
        earliest = first.get(span.trace_id)
        if earliest is None or span.started_at < earliest.started_at:
            first[span.trace_id] = span
    traces = {t.trace_id: t for t in Trace.objects.filter(tenant_id=agent.tenant_id, trace_id__in=list(first))}
    for trace in traces.values():
        if trace.agent_id not in (None, agent.pk):
            raise IngestError(
                403,
                "trace_of_another_agent",
                f"Trace {trace.trace_id} belongs to another agent.",
                error_class="authorization",
            )
    missing = [tid for tid in first if tid not in traces]
    if missing:
        runs = {run.id.hex: run for run in hooks.runs_by_id(agent.tenant_id, [uuid.UUID(t) for t in missing])}
        for run in runs.values():
            if run.agent_id != agent.pk:
                raise IngestError(
                    403,
                    "trace_of_another_agent",
                    f"Trace {run.id.hex} is a run of another agent.",
                    error_class="authorization",
                )
        new = []
        for tid in missing:
            run, root = runs.get(tid), first[tid]
            new.append(
                Trace(
                    tenant_id=agent.tenant_id,
                    trace_id=tid,
                    agent_id=agent.pk,
                    run=run,
                    end_user=run.end_user if run else redact_text(root.end_user, limit=200),
                    name=redact_text((run.task if run else "") or root.name, limit=300),
                    started_at=run.created_at if run else root.started_at,
                )
            )
        Trace.objects.bulk_create(new, ignore_conflicts=True)
        traces.update({t.trace_id: t for t in Trace.objects.filter(tenant_id=agent.tenant_id, trace_id__in=missing)})
    return traces


def _existing_span_keys(trace_pks: list[int], span_ids: list[str]) -> set[tuple[int, str]]:
    keys: set[tuple[int, str]] = set()
    for start in range(0, len(span_ids), _CHUNK):
        chunk = span_ids[start : start + _CHUNK]
        keys.update(Span.objects.filter(trace_id__in=trace_pks, span_id__in=chunk).values_list("trace_id", "span_id"))
    return keys


def _calls_by_key(traces: dict[str, Trace], spans: list[SpanIn]) -> dict[tuple[Any, str], int]:
    wanted = {
        (traces[s.trace_id].run_id, redact_text(s.call_id)) for s in spans if s.call_id and traces[s.trace_id].run_id
    }
    if not wanted:
        return {}
    return hooks.call_pks({r for r, _ in wanted}, {c for _, c in wanted})


SPAN_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "kind",
    "name",
    "started_at",
    "ended_at",
    "duration_ms",
    "skill_name",
    "skill_version",
    "call_id",
    "verdict",
    "outcome",
    "error_class",
    "arguments_sha256",
    "result_bytes",
    "attributes",
    "source",
)
_STAGE_TABLE = "traces_span_stage"


def store_spans(*, agent: Agent, spans: list[SpanIn], source: str) -> IngestResult:
    """Check every span, then write the new ones in bulk and bump each trace's counters once."""
    _check(spans)
    charge_rate(tenant_id=agent.tenant_id, spans=len(spans))
    rules = _skill_payload_rules({s.skill_name for s in spans if s.skill_name})
    with transaction.atomic():
        traces = _resolve_traces(agent, spans)
        calls = _calls_by_key(traces, spans)
        seen: set[tuple[int, str]] = set()
        rows: list[tuple] = []
        for span in spans:
            trace = traces[span.trace_id]
            key = (trace.pk, span.span_id)
            if key in seen:  # the same span twice in one request: the first wins
                continue
            seen.add(key)
            rule = rules.get((span.skill_name, span.skill_version)) or rules.get((span.skill_name, ""))
            attrs = redact_span_attributes(span.attributes, rule)
            duration = (span.ended_at - span.started_at).total_seconds() * 1000 if span.ended_at else None
            rows.append(
                (
                    trace.pk,
                    span.span_id,
                    span.parent_span_id,
                    span.kind,
                    redact_text(span.name, limit=300),
                    span.started_at,
                    span.ended_at,
                    duration,
                    redact_text(span.skill_name, limit=200),
                    span.skill_version[:64],
                    calls.get((trace.run_id, redact_text(span.call_id))),
                    span.verdict[:10],
                    span.outcome[:32],
                    span.error_class[:32],
                    str(attrs.get("airlock.arguments.sha256", ""))[:64],
                    _int(attrs.get("airlock.result.bytes")),
                    attrs,
                    source,
                )
            )
        writer = _copy_rows if connection.vendor == "postgresql" else _bulk_create_rows
        inserted = writer(rows)
        _bump_traces(inserted)
    return IngestResult(received=len(spans), stored=len(inserted), traces=sorted(traces))


def _copy_rows(rows: list[tuple]) -> list[tuple]:
    """PostgreSQL: COPY into a session-local staging table, then one INSERT ... ON CONFLICT DO NOTHING
    RETURNING, which both skips spans already stored and reports exactly which rows were new."""
    columns = ", ".join(SPAN_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE_TABLE} ON COMMIT DELETE ROWS AS "
            f"SELECT {columns} FROM traces_span WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY {_STAGE_TABLE} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row((*row[:16], json.dumps(row[16]), row[17]))
        cursor.execute(
            f"INSERT INTO traces_span ({columns}) SELECT {columns} FROM {_STAGE_TABLE} "
            "ON CONFLICT (trace_id, span_id) DO NOTHING RETURNING trace_id, started_at, ended_at, "
            "error_class"
        )
        inserted = cursor.fetchall()
        cursor.execute(f"DELETE FROM {_STAGE_TABLE}")
    return inserted


def _bulk_create_rows(rows: list[tuple]) -> list[tuple]:
    """Other databases: skip the keys already stored, then bulk_create (conflicts from a concurrent
    duplicate request are ignored; its counters may then count a span twice)."""
    existing = _existing_span_keys(list({row[0] for row in rows}), list({row[1] for row in rows}))
    new = [row for row in rows if (row[0], row[1]) not in existing]
    Span.objects.bulk_create(
        [Span(**dict(zip(SPAN_COLUMNS, row, strict=True))) for row in new], batch_size=500, ignore_conflicts=True
    )
    return [(row[0], row[5], row[6], row[13]) for row in new]


def _int(value: Any) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def _bump_traces(inserted: list[tuple]) -> None:
    """One UPDATE per trace from the (trace pk, started_at, ended_at, error_class) of the new rows."""
    per_trace: dict[int, dict[str, Any]] = {}
    for trace_pk, started_at, ended_at, error_class in inserted:
        agg = per_trace.setdefault(trace_pk, {"n": 0, "errors": 0, "start": started_at, "end": None})
        agg["n"] += 1
        agg["errors"] += 1 if error_class else 0
        agg["start"] = min(agg["start"], started_at)
        end = ended_at or started_at
        agg["end"] = end if agg["end"] is None else max(agg["end"], end)
    for pk, agg in per_trace.items():
        Trace.objects.filter(pk=pk).update(
            span_count=F("span_count") + agg["n"],
            error_count=F("error_count") + agg["errors"],
            started_at=Case(When(started_at__gt=agg["start"], then=Value(agg["start"])), default=F("started_at")),
            ended_at=Case(
                When(Q(ended_at__isnull=True) | Q(ended_at__lt=agg["end"]), then=Value(agg["end"])),
                default=F("ended_at"),
            ),
        )


# --- the batch JSON format ----------------------------------------------------------------------

BATCH_FIELDS = {
    "trace_id",
    "run_id",
    "span_id",
    "parent_span_id",
    "kind",
    "name",
    "started_at",
    "ended_at",
    "skill_name",
    "skill_version",
    "call_id",
    "outcome",
    "error_class",
    "end_user",
    "attributes",
}


def _parse_time(value: Any, where: str, *, required: bool) -> datetime | None:
    if value in (None, ""):
        if required:
            raise IngestError(400, "missing_time", f"{where} is required (ISO 8601 with a timezone).")
        return None
    if not isinstance(value, str):
        raise IngestError(400, "bad_time", f"{where} must be an ISO 8601 string.")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise IngestError(400, "bad_time", f"{where} is not an ISO 8601 time: {value!r}.") from None
    if moment.tzinfo is None:
        raise IngestError(400, "bad_time", f"{where} needs a timezone (for example a trailing Z).")
    return moment


def _string(item: dict, key: str, where: str) -> str:
    value = item.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise IngestError(400, f"bad_{key}", f"{where}.{key} must be a string.")
    return value


def _batch_trace_id(item: dict, where: str) -> str:
    if item.get("trace_id"):
        return _string(item, "trace_id", where).lower()
    run_id = item.get("run_id")
    if not run_id:
        raise IngestError(400, "missing_trace", f"{where} needs trace_id or run_id.")
    try:
        return uuid.UUID(str(run_id)).hex
    except ValueError:
        raise IngestError(400, "bad_run_id", f"{where}.run_id is not a UUID.") from None


def _derived_span_id(item: dict) -> str:
    """A span without an id gets one derived from its content, so resending it stays idempotent."""
    return hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()[:16]


def decode_batch(body: bytes) -> list[SpanIn]:
    try:
        document = bounded_json.loads(body)
    except ValueError as exc:
        raise IngestError(400, "bad_json", f"The body is not JSON: {exc}.") from None
    if not isinstance(document, dict) or not isinstance(document.get("spans"), list):
        raise IngestError(400, "bad_batch", 'The body must be an object with a "spans" list.')
    spans = []
    for index, item in enumerate(document["spans"]):
        where = f"spans[{index}]"
        if not isinstance(item, dict):
            raise IngestError(400, "bad_span", f"{where} must be an object.")
        unknown = set(item) - BATCH_FIELDS
        if unknown:
            raise IngestError(400, "unknown_field", f"{where} has unknown fields: {', '.join(sorted(unknown))}.")
        attributes = item.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise IngestError(400, "bad_attributes", f"{where}.attributes must be an object.")
        spans.append(
            SpanIn(
                trace_id=_batch_trace_id(item, where),
                span_id=_string(item, "span_id", where).lower() or _derived_span_id(item),
                parent_span_id=_string(item, "parent_span_id", where).lower(),
                kind=_string(item, "kind", where) or SpanKind.OTHER,
                name=_string(item, "name", where),
                started_at=_parse_time(item.get("started_at"), f"{where}.started_at", required=True),
                ended_at=_parse_time(item.get("ended_at"), f"{where}.ended_at", required=False),
                skill_name=_string(item, "skill_name", where),
                skill_version=_string(item, "skill_version", where),
                call_id=_string(item, "call_id", where),
                outcome=_string(item, "outcome", where),
                error_class=_string(item, "error_class", where),
                end_user=_string(item, "end_user", where),
                attributes=attributes,
            )
        )
    return spans
