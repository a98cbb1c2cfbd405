"""Agent API of the execution plane: pipelines (sagas) on a run, and job completion callbacks."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent
from console.api_errors import error_body
from reliability.jobs import complete_job
from reliability.models import LongJob, Pipeline
from reliability.sagas import PipelineInvalid, pipeline_state, submit_pipeline
from runs import lifecycle
from runs.models import Run


def _run_for_agent(request: Request, run_id) -> Run:
    agent = request.auth
    run = Run.objects.for_agent(agent).filter(pk=run_id, agent=agent).select_related("tenant", "agent").first()
    if run is None:
        raise Http404("No run with this id for this agent.")
    return run


@extend_schema(request=OpenApiTypes.OBJECT, responses={202: OpenApiTypes.OBJECT}, tags=["pipelines"],
               description="Submit an ordered pipeline: steps {step_id, name, arguments, when?, compensation?}. "
                           "Runs in the background as a saga; follow it with GET or the run's events.")
@api_view(["POST"])
@permission_classes([IsAgent])
def pipeline_submit(request: Request, run_id) -> Response:
    run = _run_for_agent(request, run_id)
    if not lifecycle.is_open(run.status):
        return Response(error_body("validation", "run_closed", f"The run is {run.status}."), status=409)
    data = request.data if isinstance(request.data, dict) else {}
    try:
        pipeline, created = submit_pipeline(run=run, pipeline_id=data.get("pipeline_id"), steps=data.get("steps"))
    except PipelineInvalid as exc:
        return Response(error_body("validation", "invalid_pipeline", str(exc)), status=400)
    return Response(pipeline_state(pipeline), status=202 if created else 200)


@extend_schema(responses=OpenApiTypes.OBJECT, tags=["pipelines"])
@api_view(["GET"])
@permission_classes([IsAgent])
def pipeline_detail(request: Request, run_id, pipeline_id: str) -> Response:
    run = _run_for_agent(request, run_id)
    pipeline = Pipeline.objects.filter(run=run, pipeline_id=pipeline_id).first()
    if pipeline is None:
        raise Http404("No pipeline with this id in this run.")
    return Response(pipeline_state(pipeline))


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT, tags=["pipelines"],
               description="Called by a long-running tool when its job ends: {status: succeeded|failed, result?, "
                           "error?}. The token in the URL (sent to the tool as X-Airlock-Callback) authorizes it.")
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def job_complete(request: Request, token: str) -> Response:
    job = LongJob.objects.filter(callback_token=token).first()
    if job is None:
        raise Http404("Unknown job.")
    data = request.data if isinstance(request.data, dict) else {}
    if data.get("status") not in ("succeeded", "failed"):
        return Response(error_body("validation", "invalid_status", "status must be succeeded or failed."), status=400)
    job = complete_job(job=job, succeeded=data["status"] == "succeeded", content=data.get("result"),
                       message=str(data.get("error") or ""))
    return Response({"job_id": job.job_id, "status": job.status})
