"""Trace ingest throughput into PostgreSQL (batch JSON, OTLP JSON, OTLP protobuf) beside the bare
PostgreSQL bound (the same rows through COPY), and the server time to render a 5,000-span timeline.

Requests go through Django's test client: the full server path (auth, decoding, validation,
redaction, bulk insert, counters) without network or HTTP server overhead.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/airlock_bench .venv/bin/python -m bench.traces
"""

from __future__ import annotations

import json
import os
import secrets
import time
from datetime import UTC, datetime, timedelta

from bench.common import Figure, percentile, print_table, setup_django

BATCH = 1000
BATCHES = 5
ROUNDS = 3  # formats and COPY interleaved, medians reported: shared machines are noisy
TIMELINE_SPANS = 5000
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _attributes(i: int) -> dict:
    return {
        "gen_ai.operation.name": "execute_tool" if i % 3 == 0 else "chat",
        "gen_ai.request.model": "gpt-5",
        "gen_ai.usage.input_tokens": 800 + i % 50,
        "gen_ai.usage.output_tokens": 40 + i % 9,
        "gen_ai.tool.name": "orders.lookup",
        "gen_ai.tool.call.id": f"call_{i}",
        "note": "looked up the order and summarised the refund policy for the customer",
    }


def _batch_body(trace_id: str, start: int) -> bytes:
    spans = [
        {
            "trace_id": trace_id,
            "span_id": f"{start + i + 1:016x}",
            "kind": "model_turn",
            "name": f"turn {i}",
            "started_at": (T0 + timedelta(milliseconds=i)).isoformat(),
            "ended_at": (T0 + timedelta(milliseconds=i + 3)).isoformat(),
            "attributes": _attributes(i),
        }
        for i in range(BATCH)
    ]
    return json.dumps({"spans": spans}).encode()


def _otlp_json_body(trace_id: str, start: int) -> bytes:
    def value(v):
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    spans = [
        {
            "traceId": trace_id,
            "spanId": f"{start + i + 1:016x}",
            "name": f"span {i}",
            "kind": 1,
            "startTimeUnixNano": str(1_777_636_800_000_000_000 + i * 1_000_000),
            "endTimeUnixNano": str(1_777_636_800_000_000_000 + (i + 3) * 1_000_000),
            "attributes": [{"key": k, "value": value(v)} for k, v in _attributes(i).items()],
        }
        for i in range(BATCH)
    ]
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}).encode()


def _otlp_protobuf_body(trace_id: str, start: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    def kv(k, v):
        any_value = common_pb2.AnyValue(int_value=v) if isinstance(v, int) else common_pb2.AnyValue(string_value=v)
        return common_pb2.KeyValue(key=k, value=any_value)

    spans = [
        trace_pb2.Span(
            trace_id=bytes.fromhex(trace_id),
            span_id=bytes.fromhex(f"{start + i + 1:016x}"),
            name=f"span {i}",
            start_time_unix_nano=1_777_636_800_000_000_000 + i * 1_000_000,
            end_time_unix_nano=1_777_636_800_000_000_000 + (i + 3) * 1_000_000,
            attributes=[kv(k, v) for k, v in _attributes(i).items()],
        )
        for i in range(BATCH)
    ]
    request = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=spans)])]
    )
    return request.SerializeToString()


def _ingest(client, url: str, content_type: str, make_body, key: str) -> float:
    """Spans per second over BATCHES requests of BATCH new spans each (bodies built beforehand)."""
    trace_id = secrets.token_hex(16)
    bodies = [make_body(trace_id, n * BATCH) for n in range(BATCHES)]
    started = time.perf_counter()
    for body in bodies:
        response = client.post(url, data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}")
        assert response.status_code in (200, 202), response.content[:300]
    return BATCH * BATCHES / (time.perf_counter() - started)


def _copy_bound(trace_pk: int) -> float:
    """The same number of span rows, with the same attribute JSON, through PostgreSQL COPY."""
    from django.db import connection

    rows = []
    base = secrets.randbelow(2**40) * BATCH * BATCHES
    for n in range(BATCHES * BATCH):
        i = n % BATCH
        started = T0 + timedelta(milliseconds=i)
        rows.append(
            (
                trace_pk,
                f"{base + n + 1:016x}",
                "",
                "model_turn",
                f"turn {i}",
                started,
                started + timedelta(milliseconds=3),
                3.0,
                "",
                "",
                "",
                "",
                "",
                "",
                0,
                json.dumps(_attributes(i)),
                "batch",
            )
        )
    columns = (
        "trace_id, span_id, parent_span_id, kind, name, started_at, ended_at, duration_ms, skill_name, "
        "skill_version, verdict, outcome, error_class, arguments_sha256, result_bytes, attributes, source"
    )
    started_at = time.perf_counter()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY traces_span ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    return len(rows) / (time.perf_counter() - started_at)


def _timeline_ms(client, trace_pk: int) -> tuple[float, float]:
    from django.urls import reverse

    url = reverse("traces:detail", args=[trace_pk])
    samples = []
    for _ in range(7):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    page_samples = []
    for offset in (300, 2400, 4800):
        started = time.perf_counter()
        client.get(url, {"offset": offset}, HTTP_HX_REQUEST="true")
        page_samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 50), percentile(page_samples, 50)


def run() -> list[Figure]:
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    if connection.vendor != "postgresql":
        raise RuntimeError("bench.traces measures PostgreSQL: set DATABASE_URL=postgres://...")
    from django.contrib.auth import get_user_model

    from console.models import Membership, Role, Tenant
    from console.services import create_agent
    from traces.models import Span, Trace

    settings.TRACES_INGEST_SPANS_PER_MINUTE = 10**9
    # One reusable bench tenant; only its traces are deleted, so no other app's rows are touched.
    tenant, _ = Tenant.objects.get_or_create(slug="bench-traces", defaults={"name": "Bench (traces)"})
    Span.objects.filter(trace__tenant=tenant).delete()
    Trace.objects.filter(tenant=tenant).delete()
    try:
        _, key = create_agent(tenant=tenant, name=f"bench-bot-{secrets.token_hex(3)}", role="support")
        client = Client()
        warm = _otlp_json_body(secrets.token_hex(16), 0)  # URL resolver, imports and first connection
        client.post(
            reverse("otlp:traces"), data=warm, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
        )
        copy_trace = Trace.objects.create(tenant=tenant, trace_id=secrets.token_hex(16), name="copy bound")
        samples: dict[str, list[float]] = {"batch": [], "json": [], "pb": [], "copy": []}
        for _ in range(ROUNDS):
            samples["batch"].append(
                _ingest(client, reverse("traces_api:span_batch"), "application/json", _batch_body, key)
            )
            samples["json"].append(_ingest(client, reverse("otlp:traces"), "application/json", _otlp_json_body, key))
            samples["pb"].append(
                _ingest(client, reverse("otlp:traces"), "application/x-protobuf", _otlp_protobuf_body, key)
            )
            samples["copy"].append(_copy_bound(copy_trace.pk))
        batch, otlp_json, otlp_pb, bound = (percentile(samples[k], 50) for k in ("batch", "json", "pb", "copy"))

        big = Trace.objects.create(tenant=tenant, trace_id=secrets.token_hex(16), name="5,000 spans")
        root = Span.objects.create(
            trace=big,
            span_id="f" * 16,
            kind="run",
            name="run",
            started_at=T0,
            ended_at=T0 + timedelta(seconds=TIMELINE_SPANS),
        )
        Span.objects.bulk_create(
            [
                Span(
                    trace=big,
                    span_id=f"{i + 1:016x}",
                    parent_span_id=root.span_id if i % 10 == 0 else f"{(i // 10) * 10 + 1:016x}",
                    kind="tool_call" if i % 2 else "model_turn",
                    name=f"step {i}",
                    started_at=T0 + timedelta(seconds=i),
                    ended_at=T0 + timedelta(seconds=i, milliseconds=700),
                    verdict="allow" if i % 2 else "",
                    error_class="timeout" if i % 211 == 0 else "",
                    attributes=_attributes(i),
                )
                for i in range(TIMELINE_SPANS - 1)
            ],
            batch_size=1000,
        )
        viewer, created = get_user_model().objects.get_or_create(username="bench-traces-viewer")
        if created:
            Membership.objects.create(tenant=tenant, user=viewer, role=Role.VIEWER)
        client.force_login(viewer)
        first_page_ms, later_page_ms = _timeline_ms(client, big.pk)
    finally:
        Span.objects.filter(trace__tenant=tenant).delete()
        Trace.objects.filter(tenant=tenant).delete()
    copy_name = f"COPY of the same rows into traces_span (median of {ROUNDS} interleaved rounds)"
    return [
        Figure("ingest, batch JSON endpoint", batch, "spans/s", bound, copy_name),
        Figure("ingest, OTLP/HTTP JSON", otlp_json, "spans/s", bound, copy_name),
        Figure("ingest, OTLP/HTTP protobuf", otlp_pb, "spans/s", bound, copy_name),
        Figure("timeline of a 5,000-span trace, first page (p50)", first_page_ms, "ms"),
        Figure("timeline of a 5,000-span trace, next page via htmx (p50)", later_page_ms, "ms"),
    ]


def _prepare_database() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


if __name__ == "__main__":
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/airlock_bench")
    setup_django()
    _prepare_database()
    print_table(run(), "Trace ingest and timeline")
