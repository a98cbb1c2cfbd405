"""The routing API for tenant admins: approver groups, their members, and the ordered routes.

Every write goes through approvals.routing_rules; a refused change is a 400 naming the field and the
problem (`invalid_condition`, `not_an_approver`, `duplicate_name`...). Another tenant's group or route is
a 404; a member of the tenant without the admin role gets 403.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import routing_rules
from approvals.models import ApprovalRoute, ApproverGroup
from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from console.models import Role
from console.tenancy import get_visible_or_404, require_role, tenant_for_user_or_404


def group_to_dict(group: ApproverGroup) -> dict:
    return {
        "id": group.pk,
        "tenant": group.tenant.slug,
        "name": group.name,
        "members": sorted(user.get_username() for user in group.members.all()),
    }


def route_to_dict(route: ApprovalRoute) -> dict:
    return {
        "id": route.pk,
        "tenant": route.tenant.slug,
        "position": route.position,
        "name": route.name,
        "condition": route.condition,
        "group": route.group.name,
        "fallback_group": route.fallback_group.name if route.fallback_group_id else None,
    }


class GroupSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    tenant = serializers.CharField(read_only=True)
    name = serializers.CharField(max_length=200)
    members = serializers.ListField(child=serializers.CharField(), read_only=True)


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)


class RouteSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    tenant = serializers.CharField(read_only=True)
    position = serializers.IntegerField(read_only=True)
    name = serializers.CharField(max_length=200)
    condition = serializers.CharField(max_length=4000, help_text="In the policy language, over the call.")
    group = serializers.CharField(max_length=200, help_text="The name of one of the tenant's approver groups.")
    fallback_group = serializers.CharField(max_length=200, required=False, allow_null=True, default=None)


class MoveSerializer(serializers.Serializer):
    position = serializers.IntegerField(min_value=0, help_text="0 is first.")


class PreviewSerializer(serializers.Serializer):
    condition = serializers.CharField(max_length=4000)


def _refused(exc: routing_rules.RoutingError) -> Response:
    extra = {"field": exc.field} if exc.field else {}
    return Response(error_body("validation", exc.code, str(exc), **extra), status=400)


def _admin_object(queryset, user, pk: int):
    """An object of a tenant the user can see (else 404), as its admin (else 403)."""
    found = get_visible_or_404(queryset.select_related("tenant"), user, pk=pk)
    require_role(user, found.tenant, Role.ADMIN)
    return found


def _groups_by_name(tenant, data: dict) -> dict:
    """The route body's group names as the tenant's groups; an unknown name stays a string for the service
    to refuse (`unknown_group`) with the field it came from."""
    named = {g.name: g for g in ApproverGroup.objects.filter(tenant=tenant)}
    return {
        field: named.get(data[field], data[field]) if data.get(field) else None for field in ("group", "fallback_group")
    }


@extend_schema(
    request=GroupSerializer,
    responses={
        200: inline_serializer("ApprovalGroupList", {"results": GroupSerializer(many=True)}),
        201: GroupSerializer,
        **error_responses(400, 403, 404),
    },
    tags=["approval routing"],
)
@api_view(["GET", "POST"])
@permission_classes([IsHuman])
def tenant_groups(request: Request, tenant_slug: str) -> Response:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    if request.method == "GET":
        groups = ApproverGroup.objects.filter(tenant=tenant).select_related("tenant").prefetch_related("members")
        return Response({"results": [group_to_dict(g) for g in groups]})
    body = GroupSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_group", "Give the group a name.")
    try:
        group = routing_rules.create_group(tenant=tenant, name=body.validated_data["name"], actor=request.user)
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(group_to_dict(group), status=201)


@extend_schema(
    request=None,
    responses={200: GroupSerializer, 204: None, **error_responses(400, 403, 404)},
    tags=["approval routing"],
)
@api_view(["GET", "DELETE"])
@permission_classes([IsHuman])
def group_detail(request: Request, group_id: int) -> Response:
    group = _admin_object(ApproverGroup.objects.prefetch_related("members"), request.user, group_id)
    if request.method == "GET":
        return Response(group_to_dict(group))
    try:
        routing_rules.delete_group(group=group, actor=request.user)
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(status=204)


@extend_schema(
    request=MemberSerializer,
    responses={200: GroupSerializer, **error_responses(400, 403, 404)},
    tags=["approval routing"],
)
@api_view(["POST", "DELETE"])
@permission_classes([IsHuman])
def group_members(request: Request, group_id: int) -> Response:
    """POST adds an approver of the tenant to the group; DELETE (same body) removes them."""
    group = _admin_object(ApproverGroup.objects, request.user, group_id)
    body = MemberSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_member", 'Name the user: {"username": ...}.')
    user = get_user_model().objects.filter(username=body.validated_data["username"]).first()
    try:
        if request.method == "POST":
            routing_rules.add_group_member(group=group, user=user, actor=request.user)
        elif user is not None:
            routing_rules.remove_group_member(group=group, user=user, actor=request.user)
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(group_to_dict(ApproverGroup.objects.prefetch_related("members").get(pk=group.pk)))


@extend_schema(
    request=RouteSerializer,
    responses={
        200: inline_serializer("ApprovalRouteList", {"results": RouteSerializer(many=True)}),
        201: RouteSerializer,
        **error_responses(400, 403, 404),
    },
    tags=["approval routing"],
)
@api_view(["GET", "POST"])
@permission_classes([IsHuman])
def tenant_routes(request: Request, tenant_slug: str) -> Response:
    """The tenant's routes in order (the first whose condition matches a call wins), or a new one, last."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    if request.method == "GET":
        routes = ApprovalRoute.objects.filter(tenant=tenant).select_related("tenant", "group", "fallback_group")
        return Response({"results": [route_to_dict(r) for r in routes]})
    body = RouteSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_route", "A route needs a name, a condition and a group.")
    data = body.validated_data
    try:
        route = routing_rules.save_route(
            tenant=tenant,
            name=data["name"],
            condition=data["condition"],
            **_groups_by_name(tenant, data),
            actor=request.user,
        )
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(route_to_dict(route), status=201)


@extend_schema(
    request=RouteSerializer,
    responses={200: RouteSerializer, 204: None, **error_responses(400, 403, 404)},
    tags=["approval routing"],
)
@api_view(["GET", "PUT", "DELETE"])
@permission_classes([IsHuman])
def route_detail(request: Request, route_id: int) -> Response:
    route = _admin_object(ApprovalRoute.objects.select_related("group", "fallback_group"), request.user, route_id)
    if request.method == "GET":
        return Response(route_to_dict(route))
    if request.method == "DELETE":
        routing_rules.delete_route(route=route, actor=request.user)
        return Response(status=204)
    body = RouteSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_route", "A route needs a name, a condition and a group.")
    data = body.validated_data
    try:
        route = routing_rules.save_route(
            tenant=route.tenant,
            route=route,
            name=data["name"],
            condition=data["condition"],
            **_groups_by_name(route.tenant, data),
            actor=request.user,
        )
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(route_to_dict(route))


@extend_schema(
    operation_id="approval_route_move",
    request=MoveSerializer,
    responses={
        200: inline_serializer("ApprovalRouteOrder", {"results": RouteSerializer(many=True)}),
        **error_responses(400, 403, 404),
    },
    tags=["approval routing"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def route_move(request: Request, route_id: int) -> Response:
    route = _admin_object(ApprovalRoute.objects, request.user, route_id)
    body = MoveSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_position", "The position is a whole number, 0 for first.")
    routes = routing_rules.move_route(route=route, to_position=body.validated_data["position"], actor=request.user)
    return Response({"results": [route_to_dict(r) for r in routes]})


@extend_schema(
    operation_id="approval_route_preview",
    request=PreviewSerializer,
    responses={
        200: inline_serializer(
            "ApprovalRoutePreview",
            {
                "results": inline_serializer(
                    "ApprovalRoutePreviewRow",
                    {
                        "approval_id": serializers.IntegerField(),
                        "skill": serializers.CharField(),
                        "status": serializers.CharField(),
                        "created_at": serializers.DateTimeField(),
                        "matches": serializers.BooleanField(),
                        "routed_to": serializers.CharField(allow_null=True),
                    },
                    many=True,
                )
            },
        ),
        **error_responses(400, 403, 404),
    },
    tags=["approval routing"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def route_preview(request: Request, tenant_slug: str) -> Response:
    """A condition tried on the tenant's last 50 requests: which it matches, and where the current routes send each."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    body = PreviewSerializer(data=request.data)
    if not body.is_valid():
        return invalid_body(body, "invalid_condition", "Give the condition to preview.")
    try:
        rows = routing_rules.preview_condition(tenant=tenant, condition=body.validated_data["condition"])
    except routing_rules.RoutingError as exc:
        return _refused(exc)
    return Response(
        {
            "results": [
                {
                    "approval_id": row.approval.pk,
                    "skill": row.approval.skill_name,
                    "status": row.approval.status,
                    "created_at": row.approval.created_at.isoformat(),
                    "matches": row.matches,
                    "routed_to": row.routed_to or None,
                }
                for row in rows
            ]
        }
    )
