"""`POST /api/v1/runs/{run_id}/local-calls`: the SDK uploads the calls it decided locally while Airlock was
unreachable (runs.local_calls). One answer per call; the good calls of an upload are recorded whatever the
others are, except when the whole upload is refused with nothing recorded: an impossible time (400) or the
agent's rate limit used up (429, `Retry-After`). A revoked agent's genuine key is accepted here, and only
here: what it decided before the revocation is recorded, anything decided after is recorded flagged."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent, RevokedAgentMayReport
from console.api_errors import error_body, error_responses
from runs.api.serializers import LocalCallsUploadedSerializer, LocalCallsUploadSerializer
from runs.errors import RateLimited, ValidationFailed
from runs.local_calls import MAX_UPLOAD, record_local_calls
from runs.models import Run


@extend_schema(
    operation_id="runs_local_calls_upload",
    request=LocalCallsUploadSerializer,
    responses={200: LocalCallsUploadedSerializer, **error_responses(400, 401, 404, 429)},
    tags=["runs"],
    description="Upload calls the SDK decided locally under a signed decision bundle, as its spool holds "
    "them. Idempotent by call id: the same call again answers as the first time; the same id with other "
    "content is refused (`call_id_conflict`). Each call is judged again by today's policy; one it would "
    "not allow is recorded with `flagged: true` and its owners and the tenant's admins are told.",
)
@api_view(["POST"])
@authentication_classes([RevokedAgentMayReport])
@permission_classes([IsAgent])
def upload_local_calls(request: Request, run_id) -> Response:
    agent = request.auth
    run = Run.objects.of_agent(agent).filter(pk=run_id).select_related("snapshot", "tenant", "agent").first()
    if run is None:
        raise Http404("No run with this id for this agent.")
    calls = request.data.get("calls") if isinstance(request.data, dict) else None
    if not isinstance(calls, list) or not calls:
        return Response(
            error_body("validation", "invalid_upload", 'Send {"calls": [...]}: the spooled calls of this run.'),
            status=400,
        )
    if len(calls) > MAX_UPLOAD:
        return Response(
            error_body(
                "validation",
                "too_many_calls",
                f"An upload holds at most {MAX_UPLOAD} calls; this one has {len(calls)}. Send them in batches.",
                limit=MAX_UPLOAD,
            ),
            status=400,
        )
    try:
        answers = record_local_calls(run=run, agent=agent, calls=calls)
    except ValidationFailed as exc:  # the whole upload refused, nothing of it recorded
        return Response({"error": exc.as_error()}, status=400)
    except RateLimited as exc:  # the agent's minute is used up: the SDK sends the batch again after retry_after
        return Response({"error": exc.as_error()}, status=429, headers={"Retry-After": str(exc.extra["retry_after"])})
    recorded = sum(1 for answer in answers if answer["status"] == "recorded")
    return Response(
        {"run_id": str(run.pk), "recorded": recorded, "refused": len(answers) - recorded, "results": answers}
    )
