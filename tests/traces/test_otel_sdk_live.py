"""The real OpenTelemetry SDK, configured only through OTEL_* environment variables, exports GenAI
spans to a live Airlock (uvicorn serving the ASGI app); they land on the run's trace."""

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tests.browser.conftest import asgi_live_server  # noqa: F401 - the fixture
from tests.traces.conftest import make_run
from traces.models import Span, SpanKind
from traces.recording import ensure_trace, record_span


def _tracer(monkeypatch, url: str, key: str, compression: str):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{url}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{key}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-agent", "enduser.id": "alice@example.com"})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # configuration alone
    return provider, provider.get_tracer("support-agent")


def _run_context(run):
    """The agent joins the run's trace: its trace id is the run id (as returned by POST /runs)."""
    parent = SpanContext(
        trace_id=int(run.id.hex, 16),
        span_id=0x1111111111111111,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return otel_trace.set_span_in_context(NonRecordingSpan(parent))


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_sdk_genai_spans_appear_on_the_runs_trace(
    asgi_live_server,
    monkeypatch,
    acme,
    agent_and_key,  # noqa: F811
    compression,
):
    from registry.models import Snapshot

    agent, key = agent_and_key
    snapshot = Snapshot.objects.create(
        number=1, body={}, canonical_sha256="0" * 64, signature="x", key_id="k", reason="t"
    )
    run = make_run(tenant=acme, agent=agent, snapshot=snapshot)
    trace = ensure_trace(run)
    from django.utils import timezone

    record_span(run=run, kind="tool_call", name="orders.lookup", started_at=timezone.now(), verdict="allow")
    provider, tracer = _tracer(monkeypatch, asgi_live_server.url, key, compression)
    with tracer.start_as_current_span(
        "invoke_agent support", context=_run_context(run), attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span(
            "chat gpt-5",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-5",
                "gen_ai.usage.input_tokens": 812,
                "gen_ai.usage.output_tokens": 64,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool orders.lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "orders.lookup",
                "gen_ai.tool.call.id": "call_7",
                "gen_ai.tool.call.arguments": '{"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}',
            },
        ):
            pass
    assert provider.force_flush(10_000)
    provider.shutdown()

    spans = {s.name: s for s in Span.objects.filter(trace=trace, source="otlp")}
    assert set(spans) == {"invoke_agent support", "chat gpt-5", "execute_tool orders.lookup"}
    root = spans["invoke_agent support"]
    assert spans["chat gpt-5"].kind == SpanKind.MODEL_TURN and spans["chat gpt-5"].parent_span_id == root.span_id
    tool = spans["execute_tool orders.lookup"]
    assert (tool.kind, tool.skill_name) == (SpanKind.TOOL_CALL, "orders.lookup")
    assert tool.attributes["gen_ai.tool.call.id"] == "call_7"
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in str(tool.attributes)
    assert spans["chat gpt-5"].attributes["service.name"] == "support-agent"
    trace.refresh_from_db()
    assert trace.span_count == 4  # Airlock's own span and the agent's three
