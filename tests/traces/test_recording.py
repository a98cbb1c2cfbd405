from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from traces.models import Span, Trace
from traces.recording import ensure_trace, new_span_id, record_span, trace_id_for_run

pytestmark = pytest.mark.django_db


def test_one_trace_per_run_carries_tenant_agent_and_end_user(run):
    trace = ensure_trace(run)
    assert trace.trace_id == run.id.hex and len(trace.trace_id) == 32
    assert (trace.tenant_id, trace.agent_id, trace.end_user) == (run.tenant_id, run.agent_id, "alice@example.com")
    run.refresh_from_db()  # drops the per-instance cache
    assert ensure_trace(run).pk == trace.pk
    assert Trace.objects.count() == 1


def test_ensure_trace_adopts_a_trace_the_agent_opened_through_ingest(run, acme):
    opened = Trace.objects.create(tenant=acme, trace_id=trace_id_for_run(run), name="otel")
    assert ensure_trace(run).pk == opened.pk
    opened.refresh_from_db()
    assert opened.run_id == run.pk and opened.end_user == "alice@example.com"


def test_record_span_nests_counts_and_returns_a_usable_parent(run):
    start = timezone.now()
    root = record_span(run=run, kind="run", name="run", started_at=start)
    child = record_span(
        run=run,
        kind="tool_call",
        name="billing.create_refund",
        started_at=start,
        ended_at=start + timedelta(milliseconds=40),
        parent_span_id=root.span_id,
        verdict="deny",
        outcome="denied",
        error_class="authorization",
    )
    assert len(root.span_id) == 16 and int(root.span_id, 16) >= 0
    assert child.parent_span_id == root.span_id and child.duration_ms == pytest.approx(40)
    assert child.attributes["gen_ai.operation.name"] == "execute_tool"
    assert child.attributes["gen_ai.security.decision.type"] == "deny"
    trace = Trace.objects.get()
    assert (trace.span_count, trace.error_count) == (2, 1)
    assert trace.ended_at == start + timedelta(milliseconds=40)


def test_record_span_is_one_insert_and_one_update_once_the_trace_exists(run):
    ensure_trace(run)
    with CaptureQueriesContext(connection) as queries:
        record_span(run=run, kind="policy", name="policy", started_at=timezone.now())
    assert len(queries) == 2


def test_record_span_redacts_attribute_payloads(run):
    span = record_span(
        run=run,
        kind="tool_call",
        name="x",
        started_at=timezone.now(),
        attributes={"arguments": {"note": "key sk-abcdefghijklmnopqrstuvwx1234"}},
    )
    stored = Span.objects.get(pk=span.pk).attributes["arguments"]["note"]
    assert "sk-abcdefghijklmnopqrstuvwx1234" not in stored and stored.startswith("key sk-a")


def test_span_ids_are_unique_hex():
    ids = {new_span_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 16 for i in ids)


def test_a_span_earlier_than_the_run_moves_the_trace_start_back(run):
    trace = ensure_trace(run)
    earlier = trace.started_at - timedelta(minutes=5)
    record_span(run=run, kind="model_turn", name="plan", started_at=earlier, ended_at=earlier + timedelta(seconds=1))
    trace.refresh_from_db()
    assert trace.started_at == earlier


def test_finish_span_closes_an_open_span_and_counts_its_error(run):
    from traces.recording import finish_span

    start = timezone.now()
    span = record_span(run=run, kind="execution_attempt", name="attempt 1", started_at=start)
    finish_span(
        span,
        ended_at=start + timedelta(milliseconds=250),
        outcome="failed",
        error_class="timeout",
        attributes={"authorization": "Bearer abcdefghijklmnop"},
    )
    span.refresh_from_db()
    assert span.duration_ms == pytest.approx(250) and span.outcome == "failed"
    assert span.attributes["authorization"]["redacted"] is True
    trace = Trace.objects.get()
    assert trace.error_count == 1 and trace.ended_at == start + timedelta(milliseconds=250)
