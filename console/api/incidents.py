"""Incident controls for a tenant's admins: suspend and resume an agent, freeze and unfreeze the tenant.

Humans only (session with CSRF, or a personal token with the `approve` scope). An agent or tenant the
caller cannot see is 404; a member who is not an admin of it is 403.
"""

from datetime import timedelta

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from console import services
from console.api_auth import IsHuman
from console.api_errors import error_responses, invalid_body
from console.models import MAX_SUSPENSION, Agent, Role, Tenant
from console.tenancy import tenant_for_user_or_404, tenants_for


class SuspendSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, help_text="Why: the agent is told, the audit log keeps it.")
    minutes = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_SUSPENSION // timedelta(minutes=1),
        help_text="How long; leave it out to suspend until resumed.",
    )


class FreezeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, help_text="Why: the console's banner and refused calls say it.")


AgentStanding = inline_serializer(
    "AgentStanding",
    {
        "agent": serializers.CharField(),
        "tenant": serializers.CharField(),
        "suspended": serializers.BooleanField(),
        "suspended_until": serializers.DateTimeField(allow_null=True),
        "suspended_by": serializers.CharField(),
        "reason": serializers.CharField(),
    },
)
TenantStanding = inline_serializer(
    "TenantStanding",
    {
        "tenant": serializers.CharField(),
        "frozen": serializers.BooleanField(),
        "frozen_at": serializers.DateTimeField(allow_null=True),
        "frozen_by": serializers.CharField(),
        "reason": serializers.CharField(),
    },
)


def _agent_for_admin(request: Request, agent_id: int) -> Agent:
    agent = get_object_or_404(
        Agent.objects.select_related("tenant").filter(tenant__in=tenants_for(request.user)), pk=agent_id
    )
    tenant_for_user_or_404(request.user, agent.tenant.slug, Role.ADMIN)
    return agent


def _agent_standing(agent: Agent) -> dict:
    return {
        "agent": agent.name,
        "tenant": agent.tenant.slug,
        "suspended": agent.suspended_at is not None,
        "suspended_until": agent.suspended_until.isoformat() if agent.suspended_until else None,
        "suspended_by": agent.suspended_by_label,
        "reason": agent.suspend_reason,
    }


def _tenant_standing(tenant: Tenant) -> dict:
    return {
        "tenant": tenant.slug,
        "frozen": tenant.is_frozen,
        "frozen_at": tenant.frozen_at.isoformat() if tenant.frozen_at else None,
        "frozen_by": tenant.frozen_by_label,
        "reason": tenant.freeze_reason,
    }


@extend_schema(
    operation_id="agents_suspend",
    request=SuspendSerializer,
    responses={200: AgentStanding, **error_responses(400, 403, 404)},
    tags=["incidents"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def agent_suspend(request: Request, agent_id: int) -> Response:
    agent = _agent_for_admin(request, agent_id)
    body = SuspendSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_suspension", "Give a reason, and minutes as a positive whole number.")
    minutes = body.validated_data.get("minutes")
    agent = services.suspend_agent(
        agent=agent,
        by=request.user,
        reason=body.validated_data["reason"],
        duration=timedelta(minutes=minutes) if minutes else None,
    )
    return Response(_agent_standing(agent))


@extend_schema(
    operation_id="agents_resume",
    request=None,
    responses={200: AgentStanding, **error_responses(403, 404)},
    tags=["incidents"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def agent_resume(request: Request, agent_id: int) -> Response:
    agent = services.resume_agent(agent=_agent_for_admin(request, agent_id), by=request.user)
    return Response(_agent_standing(agent))


@extend_schema(
    operation_id="tenants_freeze",
    request=FreezeSerializer,
    responses={200: TenantStanding, **error_responses(400, 403, 404)},
    tags=["incidents"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def tenant_freeze(request: Request, tenant_slug: str) -> Response:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    body = FreezeSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_freeze", "Give the reason for the freeze.")
    return Response(_tenant_standing(services.freeze_tenant(tenant=tenant, by=request.user, **body.validated_data)))


@extend_schema(
    operation_id="tenants_unfreeze",
    request=None,
    responses={200: TenantStanding, **error_responses(403, 404)},
    tags=["incidents"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def tenant_unfreeze(request: Request, tenant_slug: str) -> Response:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    return Response(_tenant_standing(services.unfreeze_tenant(tenant=tenant, by=request.user)))
