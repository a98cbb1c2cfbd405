from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent


@extend_schema(
    responses=inline_serializer(
        "AgentIdentity",
        {
            "agent": serializers.CharField(),
            "tenant": serializers.CharField(),
            "role": serializers.CharField(),
            "key": inline_serializer(
                "AgentKeyInUse",
                {
                    "lookup": serializers.CharField(help_text="The middle part of the key this request came with."),
                    "replaced": serializers.BooleanField(
                        help_text="True for a key a rotation replaced: switch to the new key before expires_at."
                    ),
                    "expires_at": serializers.DateTimeField(
                        allow_null=True, help_text="When a replaced key stops working; null for the current key."
                    ),
                },
            ),
        },
    )
)
@api_view(["GET"])
@permission_classes([IsAgent])
def whoami(request: Request) -> Response:
    """The agent this key belongs to, and whether the key is its current one or one a rotation replaced:
    a cheap way for an SDK to check its configuration."""
    agent = request.auth
    replaced = agent.key_in_use != agent.key_lookup
    key = {
        "lookup": agent.key_in_use,
        "replaced": replaced,
        "expires_at": agent.previous_key_expires_at.isoformat() if replaced else None,
    }
    return Response({"agent": agent.name, "tenant": agent.tenant.slug, "role": agent.role, "key": key})
