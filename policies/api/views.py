"""Grant and local-decision settings API for tenant admins (session or personal access token), and the
agent's signed decision bundle."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent, IsHuman
from console.api_errors import error_body, error_responses
from console.models import Role
from console.tenancy import tenant_for_user_or_404, tenants_for
from policies import bundles, services
from policies.models import Grant
from registry.api.serializers import AudienceSerializer, SnapshotEntrySerializer


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


class GrantRevokeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


@extend_schema(request=GrantRevokeSerializer, responses=GrantSerializer, tags=["grants"])
@api_view(["POST"])
@permission_classes([IsHuman])
def grant_revoke(request: Request, grant_id: int) -> Response:
    """Revoke a grant; `reason` is kept in the grant's change log (the console asks for it)."""
    grant = get_object_or_404(Grant.objects.filter(tenant__in=tenants_for(request.user)), pk=grant_id)
    tenant_for_user_or_404(request.user, grant.tenant.slug, Role.ADMIN)
    body = GrantRevokeSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    grant = services.revoke_grant(grant=grant, revoked_by=request.user, reason=body.validated_data["reason"])
    return Response(GrantSerializer(grant).data)


# Local decisions -----------------------------------------------------------------------------------


class LocalDecisionSettingsSerializer(serializers.Serializer):
    agent_roles = serializers.ListField(
        child=serializers.RegexField(r"^[a-z][a-z0-9_-]{0,63}$", max_length=64), max_length=100
    )
    bundle_validity_seconds = serializers.IntegerField(min_value=30, max_value=7 * 24 * 3600)
    max_validity_seconds = serializers.IntegerField(read_only=True)
    updated_by = serializers.CharField(read_only=True)

    def validate_bundle_validity_seconds(self, value: int) -> int:
        ceiling = settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS
        if value > ceiling:
            raise serializers.ValidationError(f"At most {ceiling} seconds on this deployment.")
        return value


def _settings_data(row) -> dict:
    return {
        "agent_roles": list(row.agent_roles),
        "bundle_validity_seconds": int(bundles.validity_of(row).total_seconds()),
        "max_validity_seconds": settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS,
        "updated_by": row.updated_by_label,
    }


@extend_schema(request=LocalDecisionSettingsSerializer, responses=LocalDecisionSettingsSerializer, tags=["grants"])
@api_view(["GET", "PUT"])
@permission_classes([IsHuman])
def tenant_local_decisions(request: Request, tenant_slug: str) -> Response:
    """Which agent roles of the tenant may decide client-executed calls locally, and how long a bundle holds."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    if request.method == "GET":
        return Response(_settings_data(bundles.settings_of(tenant)))
    serializer = LocalDecisionSettingsSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    row = services.set_local_decisions(
        tenant=tenant,
        agent_roles=serializer.validated_data["agent_roles"],
        bundle_validity=timedelta(seconds=serializer.validated_data["bundle_validity_seconds"]),
        by_label=request.user.username,
    )
    return Response(_settings_data(row))


class BundleGrantSerializer(serializers.Serializer):
    pattern = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())


class BundleRuleSerializer(serializers.Serializer):
    id = serializers.CharField()
    verdict = serializers.CharField(help_text="allow, confirm or deny")
    condition = serializers.CharField(help_text="CEL (docs/policies.md)")
    reason = serializers.CharField()
    override_taint = serializers.BooleanField(required=False)


class BundlePolicySerializer(serializers.Serializer):
    policy_id = serializers.IntegerField()
    name = serializers.CharField()
    scope = serializers.CharField()
    tenant_id = serializers.IntegerField(allow_null=True)
    skill_name = serializers.CharField(allow_blank=True)
    version_id = serializers.IntegerField()
    version_number = serializers.IntegerField()
    rules = BundleRuleSerializer(many=True)


class BundleBodySerializer(serializers.Serializer):
    format = serializers.CharField(help_text="airlock.bundle/1")
    number = serializers.IntegerField(help_text="Grows by one whenever the bundle's content changes.")
    issued_at = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(help_text="After this, the SDK decides nothing from this bundle.")
    audience = AudienceSerializer()
    tenant_id = serializers.IntegerField()
    snapshot = serializers.IntegerField()
    local_decisions = serializers.BooleanField(help_text="The agent's role is opted in (and the tenant not frozen).")
    rate_limit_per_minute = serializers.IntegerField()
    grants = BundleGrantSerializer(many=True)
    skills = SnapshotEntrySerializer(many=True, help_text="The client-executed skills offered to the agent.")
    policies = BundlePolicySerializer(many=True)


class SignedBundleSerializer(serializers.Serializer):
    bundle = BundleBodySerializer(help_text="The signed body (docs/api.md, decision bundles).")
    signature = serializers.CharField(help_text="Ed25519 over the RFC 8785 form of `bundle`, base64.")
    key_id = serializers.CharField()
    algorithm = serializers.CharField()
    canonicalization = serializers.CharField()


@extend_schema(
    responses={200: SignedBundleSerializer, 304: None, **error_responses(401, 403)}, tags=["registry (agents)"]
)
@api_view(["GET"])
@permission_classes([IsAgent])
def decision_bundle(request: Request) -> Response:
    """This agent's signed decision bundle (docs/sdk.md, "Local decisions"); ETag / If-None-Match. A suspended
    agent gets none (403 agent_suspended): its last bundle stops deciding at its valid_until."""
    agent = request.auth
    if agent.is_suspended(timezone.now()):
        return Response(
            error_body("authorization", "agent_suspended", agent.suspension_notice()), status=status.HTTP_403_FORBIDDEN
        )
    signed = bundles.bundle_for(agent)
    if signed.etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": signed.etag})
    return Response(
        {
            "bundle": signed.body,
            "signature": signed.signature,
            "key_id": signed.key_id,
            "algorithm": "Ed25519",
            "canonicalization": "RFC 8785",
        },
        headers={"ETag": signed.etag, "Cache-Control": "private, no-cache"},
    )
