"""Owners' discovery evaluations over the API: upload a namespace's labelled intents (JSONL), run them, read
the figures over time. Another team's sets answer 404, as if they did not exist."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from registry import owner_evaluations as evaluations
from registry.models import EvaluationSet, OwnerEvaluation


class EvaluationUploadSerializer(serializers.Serializer):
    namespace = serializers.CharField(max_length=100, help_text="A namespace your team owns, for example billing.")
    name = serializers.SlugField(max_length=80, help_text="The set's name; an existing set of that name is replaced.")
    file = serializers.FileField(
        allow_empty_file=True, help_text='JSONL: {"intent": "...", "expected": ["ns.skill", ...]} per line.'
    )


class EvaluationMissSerializer(serializers.Serializer):
    intent = serializers.CharField()
    expected = serializers.ListField(child=serializers.CharField())
    got = serializers.ListField(child=serializers.CharField(), help_text="The first five results.")
    rank = serializers.IntegerField(allow_null=True, help_text="Where the first expected skill came; null: not in 10.")


class EvaluationRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    snapshot = serializers.IntegerField(allow_null=True)
    intents = serializers.IntegerField()
    recall_at_1 = serializers.FloatField(allow_null=True)
    recall_at_5 = serializers.FloatField(allow_null=True)
    mrr = serializers.FloatField(allow_null=True)
    leaks = serializers.IntegerField(allow_null=True)
    misses = EvaluationMissSerializer(many=True)
    error = serializers.CharField()


class EvaluationSetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    team = serializers.CharField()
    intents = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    runs = EvaluationRunSerializer(many=True)


class EvaluationSetListSerializer(serializers.Serializer):
    evaluation_sets = EvaluationSetSerializer(many=True)


def run_data(run: OwnerEvaluation) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "snapshot": run.snapshot_number,
        "intents": run.intents,
        "recall_at_1": run.recall_at_1,
        "recall_at_5": run.recall_at_5,
        "mrr": run.mrr,
        "leaks": run.leaks,
        "misses": run.misses,
        "error": run.error,
    }


def set_data(evaluation_set: EvaluationSet, *, runs: int = 20) -> dict:
    return {
        "id": evaluation_set.pk,
        "namespace": evaluation_set.namespace,
        "name": evaluation_set.name,
        "team": evaluation_set.team.slug,
        "intents": evaluation_set.intents.count(),
        "updated_at": evaluation_set.updated_at,
        "runs": [run_data(run) for run in evaluation_set.runs.all()[:runs]],
    }


def _visible_set(request: Request, set_id: int) -> EvaluationSet:
    return get_object_or_404(EvaluationSet.objects.visible_to(request.user).select_related("team"), pk=set_id)


@extend_schema(
    methods=["GET"], operation_id="v1_evaluations_list", responses={200: EvaluationSetListSerializer}, tags=["registry"]
)
@extend_schema(
    methods=["POST"],
    request={"multipart/form-data": EvaluationUploadSerializer},
    responses={201: EvaluationSetSerializer, **error_responses(400, 403, 404)},
    tags=["registry"],
)
@api_view(["GET", "POST"])
@parser_classes([MultiPartParser])
@permission_classes([IsHuman])
def evaluation_collection(request: Request) -> Response:
    """GET: your teams' labelled sets with their latest runs. POST (multipart: namespace, name, file): upload
    labelled intents for a namespace your team owns; a bad line refuses the whole file, naming the line."""
    if request.method == "GET":
        sets = EvaluationSet.objects.visible_to(request.user).select_related("team")
        return Response({"evaluation_sets": [set_data(s, runs=1) for s in sets]})
    evaluations.require_team_member(request.user)
    body = EvaluationUploadSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_upload")
    data = body.validated_data
    try:
        evaluation_set = evaluations.upload_evaluation_set(
            namespace=data["namespace"], name=data["name"], raw=data["file"].read(), user=request.user
        )
    except evaluations.NotYours:
        raise Http404("No such namespace.") from None
    except evaluations.LabelledIntentsInvalid as exc:
        return Response(
            error_body("validation", "invalid_labelled_intents", exc.errors[0]["message"], problems=exc.errors),
            status=status.HTTP_400_BAD_REQUEST,
        )
    return Response(set_data(evaluation_set), status=status.HTTP_201_CREATED)


@extend_schema(
    operation_id="v1_evaluations_detail",
    responses={200: EvaluationSetSerializer, **error_responses(404)},
    tags=["registry"],
)
@api_view(["GET"])
@permission_classes([IsHuman])
def evaluation_detail(request: Request, set_id: int) -> Response:
    """One of your teams' sets: its runs over time, newest first (recall@1, recall@5, MRR, leaks, misses)."""
    return Response(set_data(_visible_set(request, set_id)))


@extend_schema(request=None, responses={202: EvaluationRunSerializer, **error_responses(404)}, tags=["registry"])
@api_view(["POST"])
@permission_classes([IsHuman])
def evaluation_run(request: Request, set_id: int) -> Response:
    """Queue a run of the set against the current catalog; poll the set for its figures."""
    run = evaluations.request_owner_evaluation(evaluation_set=_visible_set(request, set_id), user=request.user)
    run.refresh_from_db()  # eager in the embedded mode: already done
    return Response(run_data(run), status=status.HTTP_202_ACCEPTED)
