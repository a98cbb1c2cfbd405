"""Owners' tries of a version (runs.trials) and their history, over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from runs import trials
from runs.api.serializers import SkillTrySerializer, TryCallSerializer

TRIES_LISTED = 50


@extend_schema(
    request=TryCallSerializer,
    responses={201: SkillTrySerializer, **error_responses(400, 403, 404)},
    tags=["registry"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def version_try(request: Request, name: str, version: str) -> Response:
    """Call a version against its sandbox (a read without one: its real target) through the gate's validation,
    verdict and shaping; recorded as a try, never as a run. Owners only."""
    found = trials.version_for_owner(name=name, version=version, user=request.user)
    body = TryCallSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_try")
    try:
        recorded = trials.try_version(version=found, user=request.user, via="api", **body.validated_data)
    except trials.NotTriable as exc:
        return Response(error_body("validation", exc.code, str(exc)), status=status.HTTP_400_BAD_REQUEST)
    return Response(trials.try_data(recorded, request.user), status=status.HTTP_201_CREATED)


@extend_schema(responses={200: SkillTrySerializer(many=True), **error_responses(403, 404)}, tags=["registry"])
@api_view(["GET"])
@permission_classes([IsHuman])
def version_tries(request: Request, name: str, version: str) -> Response:
    """The version's latest tries, newest first. Owners only."""
    found = trials.version_for_owner(name=name, version=version, user=request.user)
    rows = found.tries.select_related("version__skill", "tried_by", "tenant")[:TRIES_LISTED]
    return Response([trials.try_data(row, request.user) for row in rows])
