import gzip
import json

import pytest
from django.urls import reverse
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from traces.models import Span, SpanKind, Trace
from traces.recording import ensure_trace

pytestmark = pytest.mark.django_db
T0_NS = 1_777_636_800_000_000_000  # 2026-05-01T12:00:00Z


def kv(key, value):
    if isinstance(value, bool):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(bool_value=value))
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def protobuf_request(trace_id: str, spans: list[dict]) -> bytes:
    pb_spans = [
        trace_pb2.Span(
            trace_id=bytes.fromhex(trace_id),
            span_id=bytes.fromhex(s["span_id"]),
            parent_span_id=bytes.fromhex(s.get("parent", "")),
            name=s["name"],
            start_time_unix_nano=T0_NS + s.get("start_ms", 0) * 1_000_000,
            end_time_unix_nano=T0_NS + s.get("end_ms", 10) * 1_000_000,
            attributes=[kv(k, v) for k, v in s.get("attributes", {}).items()],
            status=trace_pb2.Status(code=s.get("status", 0)),
        )
        for s in spans
    ]
    resource = trace_pb2.ResourceSpans(
        resource={"attributes": [kv("service.name", "support-agent"), kv("enduser.id", "bob@example.com")]},
        scope_spans=[trace_pb2.ScopeSpans(spans=pb_spans)],
    )
    return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def json_request(trace_id: str, spans: list[dict]) -> dict:
    def attr(k, v):
        return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}

    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "support-agent")]},
                "scopeSpans": [
                    {
                        "scope": {"name": "t"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": s["span_id"],
                                "parentSpanId": s.get("parent", ""),
                                "name": s["name"],
                                "kind": 1,
                                "startTimeUnixNano": str(T0_NS + s.get("start_ms", 0) * 1_000_000),
                                "endTimeUnixNano": str(T0_NS + s.get("end_ms", 10) * 1_000_000),
                                "attributes": [attr(k, v) for k, v in s.get("attributes", {}).items()],
                                "status": {"code": s.get("status", 0)},
                            }
                            for s in spans
                        ],
                    }
                ],
            }
        ]
    }


GENAI_SPANS = [
    {
        "span_id": "1" * 16,
        "name": "invoke_agent support",
        "attributes": {"gen_ai.operation.name": "invoke_agent"},
        "end_ms": 100,
    },
    {
        "span_id": "2" * 16,
        "parent": "1" * 16,
        "name": "chat gpt-5",
        "start_ms": 1,
        "end_ms": 40,
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-5",
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 80,
        },
    },
    {
        "span_id": "3" * 16,
        "parent": "1" * 16,
        "name": "execute_tool billing.create_refund",
        "start_ms": 41,
        "end_ms": 90,
        "status": 2,
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "billing.create_refund",
            "gen_ai.tool.call.id": "call_1",
            "error.type": "timeout",
            "gen_ai.tool.call.arguments": '{"order": 42, "api_key": "sk-proj-abcdefghijklmnop123456"}',
        },
    },
]


def post_otlp(client, body: bytes, content_type: str, **headers):
    return client.post(reverse("otlp:traces"), data=body, content_type=content_type, **headers)


def test_protobuf_genai_spans_map_onto_airlock_spans_of_the_runs_trace(agent_client, run):
    trace = ensure_trace(run)
    response = post_otlp(agent_client, protobuf_request(trace.trace_id, GENAI_SPANS), "application/x-protobuf")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-protobuf"
    assert trace_service_pb2.ExportTraceServiceResponse.FromString(response.content) is not None
    spans = {s.span_id: s for s in Span.objects.filter(trace=trace)}
    turn = spans["2" * 16]
    assert turn.kind == SpanKind.MODEL_TURN and turn.attributes["gen_ai.usage.input_tokens"] == 1200
    tool = spans["3" * 16]
    assert (tool.kind, tool.skill_name, tool.parent_span_id) == (SpanKind.TOOL_CALL, "billing.create_refund", "1" * 16)
    assert tool.error_class == "timeout" and tool.source == "otlp" and tool.duration_ms == pytest.approx(49)
    assert "sk-proj-abcdefghijklmnop123456" not in json.dumps(tool.attributes)
    assert tool.attributes["service.name"] == "support-agent"


def test_json_and_gzip_and_idempotent(agent_client):
    trace_id = "c" * 32
    body = gzip.compress(json.dumps(json_request(trace_id, GENAI_SPANS)).encode())
    for _ in range(2):
        response = post_otlp(agent_client, body, "application/json", HTTP_CONTENT_ENCODING="gzip")
        assert response.status_code == 200 and response.json() == {}
    trace = Trace.objects.get(trace_id=trace_id)
    assert trace.span_count == 3 and Span.objects.filter(trace=trace).count() == 3
    assert trace.error_count == 1


def test_malformed_otlp_is_refused_whole_with_a_status_body(agent_client):
    bad = json_request("c" * 32, [*GENAI_SPANS, {"span_id": "zz", "name": "x"}])
    response = post_otlp(agent_client, json.dumps(bad).encode(), "application/json")
    assert response.status_code == 400
    assert response.json()["code"] == 3 and "spans[3].span_id" in response.json()["message"]
    assert Span.objects.count() == 0
    junk = post_otlp(agent_client, b"\xff\xff\xff not protobuf", "application/x-protobuf")
    assert junk.status_code == 400
    from google.rpc import status_pb2

    assert status_pb2.Status.FromString(junk.content).code == 3


def test_wrong_content_type_method_and_missing_key(agent_client, client):
    assert post_otlp(agent_client, b"{}", "text/plain").status_code == 415
    assert agent_client.get(reverse("otlp:traces")).status_code == 405
    assert post_otlp(client, b"{}", "application/json").status_code == 401


def test_over_capacity_is_503_and_rate_is_429(agent_client, settings):
    body = protobuf_request("d" * 32, GENAI_SPANS)
    settings.TRACES_INGEST_MAX_INFLIGHT = 0
    response = post_otlp(agent_client, body, "application/x-protobuf")
    assert response.status_code == 503 and response["Retry-After"]
    settings.TRACES_INGEST_MAX_INFLIGHT = 4
    settings.TRACES_INGEST_SPANS_PER_MINUTE = 2
    response = post_otlp(agent_client, body, "application/x-protobuf")
    assert response.status_code == 429 and response["Retry-After"]
    assert Span.objects.count() == 0
