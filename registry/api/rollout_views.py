"""Staged rollout endpoints: roll out a published version to canary tenants or a share of runs, promote it to
everyone, roll it back. Owners and platform admins only (registry.rollouts checks, as publishing does)."""

from __future__ import annotations

from collections.abc import Callable

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from registry import rollouts, services
from registry.api.serializers import RolloutRequestSerializer, RolloutSerializer
from registry.models import Rollout, SkillVersion
from registry.snapshots import latest_index


def _version(name: str, version: str) -> SkillVersion:
    return get_object_or_404(
        SkillVersion.objects.select_related("skill__owner_team"), skill__name=name, version=version
    )


def rollout_data(rollout: Rollout) -> dict:
    staged = rollout.state == "staged"
    return {
        "name": rollout.skill.name,
        "version": rollout.version.version,
        "state": rollout.state,
        "status": rollout.version.status,
        "baseline": rollout.baseline.version if rollout.baseline_id else None,
        "tenants": sorted(rollout.tenants.values_list("slug", flat=True)) if staged else [],
        "percent": rollout.percent if staged else None,
        "snapshot": latest_index().number,
    }


def _answer(change: Callable[[], Rollout]) -> Response:
    try:
        return Response(rollout_data(change()))
    except services.ManifestInvalid as exc:  # publishing a draft into the stage found it invalid
        body = error_body("validation", "invalid_manifest", "The manifest is not valid; see errors.", errors=exc.errors)
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    except rollouts.RolloutRefused as exc:
        extra = {"fields": [{"field": exc.field, "message": exc.message}]} if exc.field else {}
        return Response(error_body("validation", exc.code, exc.message, **extra), status=status.HTTP_400_BAD_REQUEST)


_BODY_ERRORS = {
    "publish": ("invalid_stage", "publish must be true or false."),
    "percent": ("invalid_percent", "percent must be a whole number from 1 to 99 (promote to reach every run)."),
    "tenants": ("invalid_tenants", "tenants must be a non-empty list of tenant slugs."),
}
_RESPONSES = {200: RolloutSerializer, **error_responses(400, 403, 404)}


@extend_schema(request=RolloutRequestSerializer, responses=_RESPONSES, tags=["registry"])
@api_view(["POST"])
@permission_classes([IsHuman])
def version_rollout(request: Request, name: str, version: str) -> Response:
    """Serve a published version to canary tenants (`tenants`) or a share of runs (`percent`, 1 to 99) only;
    everyone else keeps the version below. Again on the staged version: change its stage."""
    found = _version(name, version)
    body = RolloutRequestSerializer(data=request.data)
    if not body.is_valid():
        rollouts.require_owner(found, request.user)  # a non-owner learns nothing, not even a bad field
        code, message = _BODY_ERRORS.get(next(iter(body.errors)), _BODY_ERRORS["tenants"])
        return invalid_body(body, code, message)
    return _answer(lambda: rollouts.roll_out_version(version=found, user=request.user, **body.validated_data))


@extend_schema(request=None, responses=_RESPONSES, tags=["registry"])
@api_view(["POST"])
@permission_classes([IsHuman])
def version_promote(request: Request, name: str, version: str) -> Response:
    """The staged version becomes the one every new run gets."""
    found = _version(name, version)
    return _answer(lambda: rollouts.promote_version(version=found, user=request.user))


@extend_schema(request=None, responses=_RESPONSES, tags=["registry"])
@api_view(["POST"])
@permission_classes([IsHuman])
def version_rollback(request: Request, name: str, version: str) -> Response:
    """Nobody new gets this version: the next new run gets the version below it (runs pinned to an older
    snapshot keep theirs)."""
    found = _version(name, version)
    return _answer(lambda: rollouts.roll_back_version(version=found, user=request.user))
