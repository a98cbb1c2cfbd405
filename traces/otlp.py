"""OTLP/HTTP trace payloads (protobuf and JSON) to and from Airlock spans.

Decoding maps the OpenTelemetry GenAI semantic conventions onto Airlock's span columns:
`gen_ai.operation.name` picks the kind (`execute_tool` → tool call, chat and friends → model
turn), `gen_ai.tool.name` / `gen_ai.tool.call.id` name the skill and the call, and the
security-guardian attributes carry a verdict. Everything else stays in the attributes.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from lib import bounded_json
from traces.ingest import IngestError, SpanIn
from traces.models import Span, SpanKind

MODEL_OPERATIONS = {"chat", "text_completion", "generate_content", "embeddings", "create_agent"}
DECISION_TO_VERDICT = {"allow": "allow", "deny": "deny", "warn": "confirm"}
STATUS_ERROR = 2
END_USER_KEYS = ("enduser.id", "user.id", "airlock.end_user")


def _time(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC)


def _to_span(
    trace_id: str,
    span_id: str,
    parent: str,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: dict[str, Any],
    status_code: int,
    status_message: str,
    resource: dict[str, Any],
) -> SpanIn:
    operation = str(attributes.get("gen_ai.operation.name", ""))
    if operation == "execute_tool":
        kind = SpanKind.TOOL_CALL
    elif operation in MODEL_OPERATIONS:
        kind = SpanKind.MODEL_TURN
    else:
        kind = SpanKind.OTHER
    error_class = ""
    if status_code == STATUS_ERROR:
        error_class = str(attributes.get("error.type") or "error")[:32]
    decision = str(attributes.get("gen_ai.security.decision.type", ""))
    end_user = next(
        (str(attributes.get(k) or resource.get(k)) for k in END_USER_KEYS if attributes.get(k) or resource.get(k)), ""
    )
    if status_message:
        attributes["otel.status_description"] = status_message
    for key in ("service.name", "service.version"):
        if key in resource:
            attributes.setdefault(key, resource[key])
    return SpanIn(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name or operation or "span",
        started_at=_time(start_ns),
        ended_at=_time(end_ns) if end_ns else None,
        kind=kind,
        skill_name=str(attributes.get("gen_ai.tool.name", "")),
        call_id=str(attributes.get("gen_ai.tool.call.id", "")),
        verdict=DECISION_TO_VERDICT.get(decision, ""),
        outcome="error" if status_code == STATUS_ERROR else ("ok" if status_code == 1 else ""),
        error_class=error_class,
        end_user=end_user,
        attributes=attributes,
    )


# --- protobuf -----------------------------------------------------------------------------------


def _pb_value(value: common_pb2.AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, which)


def _pb_attrs(attributes) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in attributes}


def decode_protobuf(body: bytes) -> list[SpanIn]:
    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception as exc:  # protobuf raises DecodeError; any failure means the same thing here
        raise IngestError(400, "bad_protobuf", f"The body is not an ExportTraceServiceRequest: {exc}.") from None
    spans = []
    for resource_spans in request.resource_spans:
        resource = _pb_attrs(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    _to_span(
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        _pb_attrs(span.attributes),
                        span.status.code,
                        span.status.message,
                        resource,
                    )
                )
    return spans


# --- JSON (OTLP/JSON: hex ids, lowerCamelCase fields, 64-bit integers possibly as strings) -----------


def _json_value(value: dict) -> Any:
    if not isinstance(value, dict) or not value:
        return None
    which, inner = next(iter(value.items()))
    if which == "intValue":
        return int(inner)
    if which == "doubleValue":
        return float(inner)
    if which == "arrayValue":
        return [_json_value(v) for v in (inner or {}).get("values", [])]
    if which == "kvlistValue":
        return {kv["key"]: _json_value(kv.get("value", {})) for kv in (inner or {}).get("values", [])}
    return inner


def _json_attrs(attributes: Any, where: str) -> dict[str, Any]:
    if attributes is None:
        return {}
    if not isinstance(attributes, list):
        raise IngestError(400, "bad_attributes", f"{where}.attributes must be a list of key/value objects.")
    try:
        return {kv["key"]: _json_value(kv.get("value", {})) for kv in attributes}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise IngestError(
            400, "bad_attributes", f"{where}.attributes has an entry that is not a key/value object."
        ) from None


def _nanos(value: Any, where: str) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise IngestError(400, "bad_time", f"{where} must be an integer number of nanoseconds.") from None


def _id(value: Any) -> str:
    return value.lower() if isinstance(value, str) else ""


def decode_json(body: bytes) -> list[SpanIn]:
    try:
        document = bounded_json.loads(body)
    except ValueError as exc:
        raise IngestError(400, "bad_json", f"The body is not JSON: {exc}.") from None
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans", []), list):
        raise IngestError(400, "bad_otlp", "The body must be an object with a resourceSpans list.")
    spans = []
    for r, resource_spans in enumerate(document.get("resourceSpans", [])):
        if not isinstance(resource_spans, dict):
            raise IngestError(400, "bad_otlp", f"resourceSpans[{r}] must be an object.")
        resource = _json_attrs((resource_spans.get("resource") or {}).get("attributes"), f"resourceSpans[{r}].resource")
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            for i, span in enumerate((scope_spans or {}).get("spans") or []):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if not isinstance(span, dict):
                    raise IngestError(400, "bad_otlp", f"{where} must be an object.")
                status = span.get("status") or {}
                spans.append(
                    _to_span(
                        _id(span.get("traceId")),
                        _id(span.get("spanId")),
                        _id(span.get("parentSpanId")),
                        str(span.get("name") or ""),
                        _nanos(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
                        _nanos(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano"),
                        _json_attrs(span.get("attributes"), where),
                        _status_code(status.get("code")),
                        str(status.get("message") or ""),
                        resource,
                    )
                )
    return spans


def _status_code(value: Any) -> int:
    if isinstance(value, str):
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(value, 0)
    return int(value or 0)


# --- responses and export ---------------------------------------------------------------------------


def success_body(*, protobuf: bool) -> bytes:
    if protobuf:
        return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
    return b"{}"


def status_body(*, code: int, message: str, protobuf: bool, extra: dict | None = None) -> bytes:
    """The google.rpc.Status body OTLP/HTTP expects on errors (code 3 invalid argument, 8 exhausted, 14 unavailable)."""
    if protobuf:
        from google.rpc import status_pb2

        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message, **(extra or {})}).encode()


def _pb_any(value: Any) -> common_pb2.AnyValue:
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, str):
        return common_pb2.AnyValue(string_value=value)
    return common_pb2.AnyValue(string_value=json.dumps(value, default=str))


def _kv(attributes: dict[str, Any]) -> list[common_pb2.KeyValue]:
    return [common_pb2.KeyValue(key=k, value=_pb_any(v)) for k, v in attributes.items() if v is not None]


def _nanos_of(moment: datetime | None) -> int:
    return int(moment.timestamp() * 1e9) if moment else 0


def encode_spans(spans: list[Span], *, tenant_slug: str) -> bytes:
    """Stored (already redacted) spans as an ExportTraceServiceRequest, for forwarding."""
    out = []
    for span in spans:
        attrs = dict(span.attributes)
        attrs.update(
            {
                "airlock.kind": span.kind,
                "airlock.skill.name": span.skill_name or None,
                "airlock.skill.version": span.skill_version or None,
                "airlock.verdict": span.verdict or None,
                "airlock.outcome": span.outcome or None,
                "error.type": span.error_class or None,
            }
        )
        out.append(
            trace_pb2.Span(
                trace_id=bytes.fromhex(span.trace.trace_id),
                span_id=bytes.fromhex(span.span_id),
                parent_span_id=bytes.fromhex(span.parent_span_id) if span.parent_span_id else b"",
                name=span.name,
                start_time_unix_nano=_nanos_of(span.started_at),
                end_time_unix_nano=_nanos_of(span.ended_at),
                attributes=_kv(attrs),
                status=trace_pb2.Status(code=STATUS_ERROR if span.error_class else 0),
            )
        )
    resource = trace_pb2.ResourceSpans(
        resource={"attributes": _kv({"service.name": "airlock", "airlock.tenant": tenant_slug})},
        scope_spans=[trace_pb2.ScopeSpans(scope={"name": "airlock"}, spans=out)],
    )
    return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()
