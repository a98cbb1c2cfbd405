from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent


@extend_schema(
    responses=inline_serializer(
        "AgentIdentity",
        {"agent": serializers.CharField(), "tenant": serializers.CharField(), "role": serializers.CharField()},
    )
)
@api_view(["GET"])
@permission_classes([IsAgent])
def whoami(request: Request) -> Response:
    """The agent this key belongs to: a cheap way for an SDK to check its configuration."""
    agent = request.auth
    return Response({"agent": agent.name, "tenant": agent.tenant.slug, "role": agent.role})
