"""Agent API of the execution plane: pipelines (sagas) on a run, and job completion callbacks."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent
from console.api_errors import error_body, error_responses, invalid_body
from reliability.jobs import complete_job
from reliability.models import LongJob, Pipeline
from reliability.sagas import PipelineInvalid, pipeline_state, submit_pipeline
from runs import lifecycle
from runs.api.serializers import (
    JobCompletedSerializer,
    JobCompleteSerializer,
    PipelineStateSerializer,
    PipelineSubmitSerializer,
)
from runs.models import Run


def _run_for_agent(request: Request, run_id) -> Run:
    agent = request.auth
    run = Run.objects.of_agent(agent).filter(pk=run_id).select_related("tenant", "agent").first()
    if run is None:
        raise Http404("No run with this id for this agent.")
    return run


@extend_schema(
    request=PipelineSubmitSerializer,
    tags=["pipelines"],
    responses={202: PipelineStateSerializer, 200: PipelineStateSerializer, **error_responses(400, 404, 409)},
    description="Submit an ordered pipeline: steps {step_id, name, arguments, when?, compensation?}. "
    "Runs in the background as a saga; follow it with GET or the run's events. "
    "202 when stored, 200 with the stored pipeline for a repeated pipeline_id.",
)
@api_view(["POST"])
@permission_classes([IsAgent])
def pipeline_submit(request: Request, run_id) -> Response:
    run = _run_for_agent(request, run_id)
    if not lifecycle.is_open(run.status):
        return Response(error_body("validation", "run_closed", f"The run is {run.status}."), status=409)
    body = PipelineSubmitSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_pipeline", "The pipeline is not valid; see fields.")
    try:
        pipeline, created = submit_pipeline(
            run=run, pipeline_id=body.validated_data["pipeline_id"], steps=body.validated_data["steps"]
        )
    except PipelineInvalid as exc:
        return Response(error_body("validation", "invalid_pipeline", str(exc)), status=400)
    return Response(pipeline_state(pipeline), status=202 if created else 200)


@extend_schema(responses={200: PipelineStateSerializer, **error_responses(404)}, tags=["pipelines"])
@api_view(["GET"])
@permission_classes([IsAgent])
def pipeline_detail(request: Request, run_id, pipeline_id: str) -> Response:
    run = _run_for_agent(request, run_id)
    pipeline = Pipeline.objects.filter(run=run, pipeline_id=pipeline_id).first()
    if pipeline is None:
        raise Http404("No pipeline with this id in this run.")
    return Response(pipeline_state(pipeline))


@extend_schema(
    request=JobCompleteSerializer,
    responses={200: JobCompletedSerializer, **error_responses(400, 404)},
    tags=["pipelines"],
    description="Called by a long-running tool when its job ends: {status: succeeded|failed, result?, "
    "error?}. The token in the URL (sent to the tool as X-Airlock-Callback) authorizes it.",
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
def job_complete(request: Request, token: str) -> Response:
    job = LongJob.objects.filter(callback_token=token).first()
    if job is None:
        raise Http404("Unknown job.")
    body = JobCompleteSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_status", "Send {status: succeeded|failed, result?, error?}.")
    data = body.validated_data
    job = complete_job(
        job=job, succeeded=data["status"] == "succeeded", content=data.get("result"), message=data.get("error") or ""
    )
    return Response({"job_id": job.job_id, "status": job.status})
