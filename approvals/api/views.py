"""The approver API: list and decide pending requests with exactly the console's rules.

Humans only (session with CSRF, or `Bearer pat_...`); agents are refused by IsHuman. A request with a
personal token needs no CSRF check (a token is not ambient authority), and the rules below are the same
either way.
"""

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import queries, services
from approvals.api.serializers import (
    ApprovalCancelSerializer,
    ApprovalDecisionSerializer,
    ApprovalListSerializer,
    ApprovalSerializer,
    approval_to_dict,
)
from approvals.models import ApprovalRequest, ApprovalStatus
from console.api_auth import IsHuman
from console.api_errors import error_body, error_responses, invalid_body
from console.models import Role
from console.tenancy import get_visible_or_404, require_role

LIST_LIMIT = 200


def _queryset():
    return ApprovalRequest.objects.select_related(
        "tenant", "call__skill_version", "group", "fallback_group"
    ).prefetch_related("votes__user")


def _for_deciding():
    """What deciding reads: the tenant (roles), the call and its run (events, span). Not the skill version,
    whose manifest is the widest column and which only an edit needs (it reads it then), nor the votes,
    which a two-person vote reads under its row lock."""
    return ApprovalRequest.objects.select_related("tenant", "call__run")


def _listed(approvals):
    """A page of requests: each skill version (its manifest is the largest column) is read once for the
    page, not once per request, and the calls' results and decision trails, which the list does not show,
    are not read at all."""
    return (
        approvals.select_related("tenant", "call", "group", "fallback_group")
        .defer("call__result", "call__decision", "call__warnings")
        .prefetch_related("call__skill_version", "votes__user")
    )


@extend_schema(
    operation_id="approvals_list",
    parameters=[
        OpenApiParameter("status", str, description="pending (default), a status, or all."),
        OpenApiParameter(
            "group",
            str,
            description="mine (default: routed to you) or all (every request of the tenants you administer).",
        ),
        OpenApiParameter("tenant", str, description="A tenant's slug."),
    ],
    responses={200: ApprovalListSerializer, **error_responses(400)},
)
@api_view(["GET"])
@permission_classes([IsHuman])
def approval_list(request: Request) -> Response:
    wanted = request.query_params.get("status", ApprovalStatus.PENDING)
    if wanted not in ApprovalStatus.values and wanted != "all":
        return Response(error_body("validation", "invalid_status", f"Unknown status {wanted!r}."), status=400)
    group = request.query_params.get("group", queries.GROUP_MINE)
    if group not in (queries.GROUP_MINE, queries.GROUP_ALL):
        message = f"Unknown group filter {group!r}: 'mine' (routed to you) or 'all' (tenants you administer)."
        return Response(error_body("validation", "invalid_group", message), status=400)
    approvals = _listed(queries.approvable(request.user, everything=group == queries.GROUP_ALL))
    if wanted != "all":
        approvals = approvals.filter(status=wanted)
    if request.query_params.get("tenant"):
        approvals = approvals.filter(tenant__slug=request.query_params["tenant"])
    listed = list(approvals.order_by("-created_at", "-id")[:LIST_LIMIT])
    routed = queries.routed_among(request.user, listed) if group == queries.GROUP_ALL else {a.pk for a in listed}
    return Response({"results": [approval_to_dict(a, request.user, routed) for a in listed]})


@extend_schema(operation_id="approvals_retrieve", responses={200: ApprovalSerializer, **error_responses(404)})
@api_view(["GET"])
@permission_classes([IsHuman])
def approval_detail(request: Request, approval_id: int) -> Response:
    return Response(approval_to_dict(get_visible_or_404(_queryset(), request.user, pk=approval_id), request.user))


@extend_schema(
    operation_id="approvals_decide",
    request=ApprovalDecisionSerializer,
    responses={200: ApprovalSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([IsHuman])
def approval_decision(request: Request, approval_id: int) -> Response:
    approval = get_visible_or_404(_for_deciding(), request.user, pk=approval_id)
    body = ApprovalDecisionSerializer(data=request.data)
    try:
        if not body.is_valid():
            require_role(request.user, approval.tenant, Role.APPROVER)  # the role before the body: 403, not 400
            return invalid_body(body, "invalid_decision", "The decision must be 'approve' or 'decline'.")
        approval = services.decide_approval(approval=approval, user=request.user, via="api", **body.validated_data)
    except services.AlreadyDecided as exc:
        return Response(error_body("conflict", "already_decided", str(exc)), status=status.HTTP_409_CONFLICT)
    except services.InvalidDecision as exc:
        extra = {"fields": exc.fields} if exc.fields else {}
        return Response(error_body("validation", "invalid_decision", str(exc), **extra), status=400)
    except services.NotInRoutedGroup as exc:
        return Response(error_body("authorization", "not_in_routed_group", str(exc)), status=403)
    except PermissionDenied as exc:
        return Response(error_body("authorization", "not_allowed", str(exc)), status=403)
    return Response(approval_to_dict(_queryset().get(pk=approval.pk), request.user))


@extend_schema(
    operation_id="approvals_cancel",
    request=ApprovalCancelSerializer,
    responses={200: ApprovalSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([IsHuman])
def approval_cancel(request: Request, approval_id: int) -> Response:
    """Take back an approved call during its undo window (status `scheduled`), with the deciding rules."""
    approval = get_visible_or_404(_for_deciding(), request.user, pk=approval_id)
    body = ApprovalCancelSerializer(data=request.data)
    try:
        services.require_decider(request.user, approval)  # the role before the body: 403, not 400
        if not body.is_valid():
            return invalid_body(body, "invalid_cancel", "Say why you cancel, in `reason`.")
        approval = services.cancel_scheduled_approval(
            approval=approval, user=request.user, reason=body.validated_data["reason"], via="api"
        )
    except services.TooLateToCancel as exc:
        return Response(error_body("conflict", "not_cancellable", str(exc)), status=status.HTTP_409_CONFLICT)
    except services.InvalidDecision as exc:
        return Response(error_body("validation", "invalid_cancel", str(exc)), status=400)
    except PermissionDenied as exc:
        return Response(error_body("authorization", "not_allowed", str(exc)), status=403)
    return Response(approval_to_dict(_queryset().get(pk=approval.pk), request.user))
