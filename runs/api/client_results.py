"""`POST /api/v1/runs/{run_id}/calls/{call_id}/result`: an agent reports a client-executed call's result."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent
from console.api_errors import error_responses, invalid_body
from runs.api.serializers import CallResultSerializer, ClientResultSerializer
from runs.client_exec import accept_client_result
from runs.errors import CallError
from runs.models import Run, ToolCall
from runs.result_facts import sdk_version
from traces.redaction import redact_text

STATUS_BY_CLASS = {"validation": 400, "authorization": 403, "expired": 410, "conflict": 409}


@extend_schema(
    request=ClientResultSerializer,
    responses={200: CallResultSerializer, **error_responses(400, 403, 404, 409, 410)},
    tags=["runs"],
)
@api_view(["POST"])
@permission_classes([IsAgent])
def report_client_result(request: Request, run_id, call_id: str) -> Response:
    run = get_object_or_404(Run.objects.of_agent(request.auth), pk=run_id)
    call = get_object_or_404(
        ToolCall.objects.select_related("run", "skill_version"), run=run, call_id=redact_text(call_id)
    )  # stored masked when it looks like a secret
    body = ClientResultSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_body", 'Send {"token", "content"} or {"token", "error": {"message"}}.')
    data = body.validated_data
    try:
        result = accept_client_result(
            call=call,
            token=data["token"],
            content=data.get("content"),
            error=dict(data["error"]) if "error" in data else None,
            adapter_version=sdk_version(request.headers.get("User-Agent", "")),
        )
    except CallError as exc:
        return Response({"error": exc.as_error()}, status=STATUS_BY_CLASS.get(exc.error_class, 400))
    return Response(result)
