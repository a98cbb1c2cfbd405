"""The agent-facing runs API (docs/api-contract.md): start a run, read it, propose a batch of calls."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api_auth import IsAgent, IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from console.tenancy import get_visible_or_404, require_any_role
from runs import authorization, context_budget, gate, lifecycle, services
from runs.api import batch_auth
from runs.api.serializers import (
    BatchResultSerializer,
    CallBatchSerializer,
    RunCreatedSerializer,
    RunCreateSerializer,
    RunFinishedSerializer,
    RunFinishSerializer,
    RunStopSerializer,
    RunSummarySerializer,
    plain_batch,
)
from runs.errors import NotPermitted
from runs.models import Run, ToolCall

REFUSAL_STATUS = {"agent_suspended": 403, "run_stopped": 409}


def _run_for_agent(request: Request, run_id) -> Run:
    agent = request.auth
    run = Run.objects.of_agent(agent).filter(pk=run_id).select_related("snapshot", "tenant").first()
    if run is None:
        raise Http404("No run with this id for this agent.")
    run.agent = agent  # as authenticated: it knows which of its keys the request came with
    return run


@extend_schema(
    request=RunCreateSerializer, responses={201: RunCreatedSerializer, **error_responses(400, 403)}, tags=["runs"]
)
@api_view(["POST"])
@permission_classes([IsAgent])
def run_create(request: Request) -> Response:
    serializer = RunCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    try:
        run = services.start_run(agent=request.auth, **serializer.validated_data)
    except NotPermitted as exc:  # a suspended agent
        return Response({"error": exc.as_error()}, status=403)
    body = {"run_id": str(run.pk), "status": run.status, "snapshot": run.snapshot.number, "trace_id": run.pk.hex}
    if run.webhook_secret:
        body["webhook_secret"] = run.webhook_secret
    return Response(body, status=201)


@extend_schema(responses={200: RunSummarySerializer, **error_responses(404)}, tags=["runs"])
@api_view(["GET"])
@permission_classes([IsAgent])
def run_detail(request: Request, run_id) -> Response:
    run = _run_for_agent(request, run_id)
    calls = list(
        ToolCall.objects.filter(run=run).only(
            "call_id", "name", "status", "verdict", "error_class", "created_at", "position"
        )
    )
    return Response(services.run_summary(run, calls))


class RunCalls(APIView):
    """Propose a batch of calls. Authentication and the run are one query (runs/api/batch_auth.py); a
    request that query does not settle takes the ordinary path and gets the ordinary answers."""

    permission_classes: list = []  # IsAgent, checked in post() on the ordinary path

    def perform_authentication(self, request: Request) -> None:
        pass  # lazily, in post()

    @extend_schema(
        request=CallBatchSerializer,
        responses={200: BatchResultSerializer, **error_responses(400, 403, 404, 409)},
        tags=["runs"],
        description="One result per call, in the order given: ok, error (typed) or approval_required. "
        "The hot path: the body is shaped as plain dicts, which BatchResultSerializer describes.",
    )
    def post(self, request: Request, run_id) -> Response:
        found = batch_auth.authenticated_run(request, run_id)
        if found is None:
            if not IsAgent().has_permission(request, self):
                self.permission_denied(request)
            run, preloaded = _run_for_agent(request, run_id), None
        else:
            run, preloaded = found
        batch = plain_batch(request.data)
        if batch is None:
            serializer = CallBatchSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            batch = serializer.validated_data
        refusal = authorization.run_refusal(run)
        if refusal is not None and refusal.code in REFUSAL_STATUS:  # the agent's keys work: 403, never 401
            return Response({"error": refusal.as_error()}, status=REFUSAL_STATUS[refusal.code])
        if not lifecycle.is_open(run.status):
            return Response(
                error_body("validation", "run_closed", f"The run is {run.status}; start a new run."), status=409
            )
        results = gate.process_batch(
            run=run, calls=batch["calls"], preloaded=preloaded, exposed_tools=batch.get("exposed_tools")
        )
        body = {"run_id": str(run.pk), "run_status": run.status, "tainted": run.tainted, "results": results}
        if run.context_budget is not None:
            body["context"] = context_budget.fit_results(run=run, results=results).as_note()
        return Response(body)


run_calls = RunCalls.as_view()


@extend_schema(
    request=RunFinishSerializer,
    responses={200: RunFinishedSerializer, **error_responses(400, 404, 409)},
    tags=["runs"],
    description="Close the run; pending approvals of the run are cancelled.",
)
@api_view(["POST"])
@permission_classes([IsAgent])
def run_finish(request: Request, run_id) -> Response:
    run = _run_for_agent(request, run_id)
    serializer = RunFinishSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    try:
        run = services.finish_run(run=run, **serializer.validated_data)
    except services.RunAlreadyClosed as exc:
        return Response(error_body("conflict", "run_closed", str(exc)), status=409)
    return Response({"run_id": str(run.pk), "status": run.status, "status_reason": run.status_reason})


@extend_schema(
    operation_id="runs_stop",
    request=RunStopSerializer,
    responses={200: RunFinishedSerializer, **error_responses(400, 403, 404, 409)},
    tags=["incidents"],
    description="A tenant's approver or admin stops an open run: it closes as `stopped` with who and why, its "
    "pending approvals are cancelled with that reason, and the agent's next call is refused with `run_stopped`.",
)
@api_view(["POST"])
@permission_classes([IsHuman])
def run_stop(request: Request, run_id) -> Response:
    run = get_visible_or_404(Run.objects.select_related("agent", "tenant"), request.user, pk=run_id)
    require_any_role(request.user, run.tenant, services.RUN_STOPPERS)
    body = RunStopSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_stop", "Give the reason for stopping the run.")
    try:
        run = services.stop_run(run=run, by=request.user, reason=body.validated_data["reason"])
    except services.RunAlreadyClosed as exc:
        return Response(error_body("conflict", "run_closed", str(exc)), status=409)
    return Response({"run_id": str(run.pk), "status": run.status, "status_reason": run.status_reason})
