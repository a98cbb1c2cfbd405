"""Grant management API for tenant admins (session or personal access token)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsHuman
from console.models import Role
from console.tenancy import tenant_for_user_or_404, tenants_for
from policies import services
from policies.models import Grant


class GrantSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    granted_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    skill_pattern = serializers.RegexField(r"^[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?$", max_length=200)
    agent_role = serializers.RegexField(r"^[a-z][a-z0-9_-]{0,63}$", max_length=64)
    oauth_scopes = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list)

    class Meta:
        model = Grant
        fields = [
            "id",
            "tenant",
            "skill_pattern",
            "agent_role",
            "oauth_scopes",
            "expires_at",
            "granted_by",
            "granted_at",
            "revoked_at",
            "is_active",
        ]
        read_only_fields = ["granted_at", "revoked_at"]


@extend_schema(
    request=GrantSerializer,
    responses={200: inline_serializer("GrantList", {"results": GrantSerializer(many=True)}), 201: GrantSerializer},
    tags=["grants"],
)
@api_view(["GET", "POST"])
@permission_classes([IsHuman])
def tenant_grants(request: Request, tenant_slug: str) -> Response:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    if request.method == "GET":
        grants = Grant.objects.filter(tenant=tenant).select_related("tenant", "granted_by")
        return Response({"results": GrantSerializer(grants, many=True).data})
    serializer = GrantSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    grant = services.create_grant(tenant=tenant, granted_by=request.user, **serializer.validated_data)
    return Response(GrantSerializer(grant).data, status=201)


@extend_schema(request=None, responses=GrantSerializer, tags=["grants"])
@api_view(["POST"])
@permission_classes([IsHuman])
def grant_revoke(request: Request, grant_id: int) -> Response:
    grant = get_object_or_404(Grant.objects.filter(tenant__in=tenants_for(request.user)), pk=grant_id)
    tenant_for_user_or_404(request.user, grant.tenant.slug, Role.ADMIN)
    grant = services.revoke_grant(grant=grant, revoked_by=request.user)
    return Response(GrantSerializer(grant).data)
