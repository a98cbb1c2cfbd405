"""Namespace claims over the API: owners ask for a namespace for their team, platform admins decide."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses
from console.models import Team
from registry import namespaces
from registry.api.serializers import (
    NamespaceClaimListSerializer,
    NamespaceClaimRequestSerializer,
    NamespaceClaimSerializer,
)
from registry.models import NamespaceClaim


def claim_data(claim: NamespaceClaim) -> dict:
    return {
        "namespace": claim.namespace,
        "team": claim.team.slug,
        "status": claim.status,
        "requested_by": claim.requested_by.get_username() if claim.requested_by_id else None,
        "decided_by": claim.decided_by.get_username() if claim.decided_by_id else None,
        "created_at": claim.created_at,
        "decided_at": claim.decided_at,
    }


def _refused(exc: namespaces.ClaimRefused) -> Response:
    return Response(error_body("validation", "claim_refused", str(exc)), status=status.HTTP_400_BAD_REQUEST)


@extend_schema(methods=["GET"], responses={200: NamespaceClaimListSerializer}, tags=["registry"])
@extend_schema(
    methods=["POST"],
    request=NamespaceClaimRequestSerializer,
    responses={201: NamespaceClaimSerializer, **error_responses(400, 403)},
    tags=["registry"],
)
@api_view(["GET", "POST"])
@permission_classes([IsHuman])
def namespace_collection(request: Request) -> Response:
    """GET: who owns which namespace, and the claims waiting. POST {namespace, team}: a team member asks for a
    namespace (a platform admin's request assigns it at once)."""
    if request.method == "GET":
        claims = NamespaceClaim.objects.select_related("team", "requested_by", "decided_by")
        return Response({"namespaces": [claim_data(claim) for claim in claims]})
    namespaces.require_claimant(request.user)
    body = NamespaceClaimRequestSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    team = Team.objects.filter(slug=body.validated_data["team"]).first()
    if team is None:
        return Response(
            error_body("validation", "unknown_team", f"No team {body.validated_data['team']!r} exists."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    try:
        claim = namespaces.request_namespace(namespace=body.validated_data["namespace"], team=team, user=request.user)
    except namespaces.ClaimRefused as exc:
        return _refused(exc)
    return Response(claim_data(claim), status=status.HTTP_201_CREATED)


def _decide(request: Request, namespace: str, decide) -> Response:
    claim = get_object_or_404(NamespaceClaim.objects.select_related("team"), namespace=namespace)
    try:
        return decide(claim)
    except namespaces.ClaimRefused as exc:
        return _refused(exc)


@extend_schema(
    request=None, responses={200: NamespaceClaimSerializer, **error_responses(400, 403, 404)}, tags=["registry"]
)
@api_view(["POST"])
@permission_classes([IsHuman])
def namespace_approve(request: Request, namespace: str) -> Response:
    """A platform admin gives the namespace to the team that asked."""
    return _decide(
        request, namespace, lambda claim: Response(claim_data(namespaces.approve_claim(claim=claim, user=request.user)))
    )


@extend_schema(request=None, responses={204: None, **error_responses(400, 403, 404)}, tags=["registry"])
@api_view(["POST"])
@permission_classes([IsHuman])
def namespace_decline(request: Request, namespace: str) -> Response:
    """A platform admin turns a request down; the namespace stays free."""

    def decline(claim: NamespaceClaim) -> Response:
        namespaces.decline_claim(claim=claim, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    return _decide(request, namespace, decline)
