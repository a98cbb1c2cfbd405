"""Span ingest for agents: the batch JSON endpoint and the standard OTLP/HTTP endpoint."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api_auth import AgentKeyAuthentication, IsAgent, TooManyBadKeys
from console.api_errors import error_body, error_responses
from console.models import Agent
from traces import ingest, otlp
from traces.api.serializers import IngestResultSerializer, SpanBatchSerializer

PROTOBUF = "application/x-protobuf"


class SpanBatchView(APIView):
    """`POST /api/v1/traces/spans`: spans of work the agent did outside Airlock (model turns, own tools).

    Body: `{"spans": [{"trace_id" or "run_id", "span_id", "parent_span_id", "kind", "name",
    "started_at", "ended_at", "skill_name", "call_id", "outcome", "error_class", "attributes"}]}`.
    Accepted whole or refused whole; a span already stored (same trace and span id) is skipped.
    """

    permission_classes = [IsAgent]
    parser_classes: list = []  # the body is read raw, with our own size limits

    @extend_schema(
        request={"application/json": SpanBatchSerializer},
        responses={
            202: OpenApiResponse(IngestResultSerializer, description="The batch was stored."),
            **error_responses(400, 401, 403, 413, 415, 429, 503),
        },
        description="The body is checked by traces.ingest.decode_batch, not by a serializer (a hot path): "
        "SpanBatchSerializer and IngestResultSerializer describe the same shapes.",
    )
    def post(self, request: Request) -> Response:
        try:
            with ingest.capacity_slot():
                spans = ingest.decode_batch(ingest.read_body(request._request))
                result = ingest.store_spans(agent=request.auth, spans=spans, source="batch")
        except ingest.IngestError as exc:
            return _error_response(exc)
        return Response(
            {
                "received": result.received,
                "stored": result.stored,
                "duplicates": result.duplicates,
                "traces": result.traces,
            },
            status=202,
        )


def _error_response(exc: ingest.IngestError) -> Response:
    extra = {"retry_after": exc.retry_after} if exc.retry_after else {}
    response = Response(error_body(exc.error_class, exc.code, exc.message, **extra), status=exc.status)
    if exc.retry_after:
        response["Retry-After"] = str(exc.retry_after)
    return response


GRPC_CODE_BY_STATUS = {400: 3, 401: 16, 403: 7, 413: 3, 415: 3, 429: 8, 503: 14}


@csrf_exempt
def otlp_traces(request: HttpRequest) -> HttpResponse:
    """`POST /v1/traces`, OTLP/HTTP: protobuf or JSON, optionally gzip; agent key as a bearer token
    (`OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer ak_..."`)."""
    content_type = (request.META.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    protobuf = content_type == PROTOBUF
    try:
        if request.method != "POST":
            raise ingest.IngestError(405, "method_not_allowed", "Use POST.")
        if content_type not in (PROTOBUF, "application/json"):
            raise ingest.IngestError(
                415,
                "unsupported_media_type",
                f"Content-Type must be {PROTOBUF} or application/json, not {content_type!r}.",
            )
        agent = _authenticate(request)
        with ingest.capacity_slot():
            body = ingest.read_body(request)
            spans = otlp.decode_protobuf(body) if protobuf else otlp.decode_json(body)
            if spans:
                ingest.store_spans(agent=agent, spans=spans, source="otlp")
    except ingest.IngestError as exc:
        response = HttpResponse(
            otlp.status_body(
                code=GRPC_CODE_BY_STATUS.get(exc.status, 2),
                message=exc.message,
                protobuf=protobuf,
                extra=error_body(exc.error_class, exc.code, exc.message),
            ),
            status=exc.status,
            content_type=PROTOBUF if protobuf else "application/json",
        )
        if exc.retry_after:
            response["Retry-After"] = str(exc.retry_after)
        if exc.status == 405:
            response["Allow"] = "POST"
        return response
    return HttpResponse(otlp.success_body(protobuf=protobuf), content_type=PROTOBUF if protobuf else "application/json")


def _authenticate(request: HttpRequest) -> Agent:
    try:
        found = AgentKeyAuthentication().authenticate(request)
    except TooManyBadKeys as exc:  # 429 with Retry-After: OTLP exporters back off and retry on exactly that
        raise ingest.IngestError(
            429, "too_many_bad_keys", str(exc.detail), retry_after=exc.wait, error_class="rate_limited"
        ) from None
    except exceptions.AuthenticationFailed as exc:
        raise ingest.IngestError(401, str(exc.get_codes()), str(exc.detail), error_class="authentication") from None
    if found is None or not isinstance(found[1], Agent):
        raise ingest.IngestError(
            401,
            "missing_key",
            "Send the agent's API key as 'Authorization: Bearer <key>'.",
            error_class="authentication",
        )
    return found[1]
