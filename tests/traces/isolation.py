"""Builders for the traces rows of tests/test_tenant_isolation.py: objects of tenant acme."""

from django.utils import timezone


def acme_trace_span(world) -> dict:
    from runs.models import ToolCall
    from tests.runs.factories import run_for
    from traces.recording import record_span

    run = run_for(world.acme_agent)
    call = ToolCall.objects.create(run=run, call_id="c1", name="docs.search")
    span = record_span(run=run, kind="tool_call", name="docs.search", started_at=timezone.now(), call=call)
    return {"pk": span.trace_id, "span_id": span.span_id, "call_pk": call.pk}


def trace_kwargs(world) -> dict:
    built = acme_trace_span(world)
    return {"pk": built["pk"]}


def span_kwargs(world) -> dict:
    built = acme_trace_span(world)
    return {"pk": built["pk"], "span_id": built["span_id"]}


def why_kwargs(world) -> dict:
    built = acme_trace_span(world)
    return {"pk": built["pk"], "call_pk": built["call_pk"]}


def run_kwargs(world) -> dict:
    from traces.models import Trace

    built = acme_trace_span(world)
    return {"run_id": Trace.objects.get(pk=built["pk"]).run_id}
