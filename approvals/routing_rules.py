"""Approval routing: a tenant's approver groups and ordered routes, and the group a new request goes to.

A route's condition is written in the policy language (policies.engine compiles and evaluates it) over the
call's policy context: `skill.name`, `skill.namespace`, `skill.effect`, `args`, `end_user`, `agent`. The
first route that matches wins; a condition that cannot be evaluated on a call (an argument it names is
missing) does not match, so the request goes on to the next route and, at the end, to every approver of
the tenant, as before routing existed: a broken route widens who is asked, never hides a request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from approvals.call_arguments import raw_arguments
from approvals.models import ApprovalRequest, ApprovalRoute, ApprovalStatus, ApproverGroup
from console.models import Role, Tenant
from policies.engine import ConditionError, check_condition, compile_condition, condition_holds

logger = logging.getLogger(__name__)

PREVIEW_REQUESTS = 50
NAME_MAX = 100
CONDITION_MAX = 4000


class RoutingError(ValueError):
    """A change to groups or routes that cannot be made; `code` and `field` name the problem (400)."""

    def __init__(self, message: str, *, code: str, field: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.field = field


# --- choosing a group ---------------------------------------------------------------------------------


def routing_context(call) -> dict:
    """The policy context the gate decided the call on (runs.gate records it), with the raw arguments."""
    seen = dict(((call.decision or {}).get("inputs") or {}).get("context") or {})
    if not seen:
        run = call.run
        seen = {
            "skill": {"name": call.name, "effect": call.effect, "namespace": call.name.rpartition(".")[0]},
            "agent": {"id": run.agent_id, "role": run.agent.role},
            "end_user": {"id": run.end_user, "roles": list(run.end_user_roles or [])},
            "tenant": {"slug": run.tenant.slug},
            "run": {"tainted": run.tainted, "taint_source": run.taint_source},
        }
    arguments = raw_arguments(call)
    return {**seen, "args": arguments if isinstance(arguments, dict) else {}}


def _matches(condition: str, context: dict) -> bool:
    try:
        return condition_holds(compile_condition(condition), context)
    except ConditionError:
        return False


def route_for(*, tenant_id: int, context: dict) -> ApprovalRoute | None:
    """The first of the tenant's routes whose condition holds for the call, or None (every approver)."""
    routes = ApprovalRoute.objects.filter(tenant_id=tenant_id).select_related("group", "fallback_group")
    return next((route for route in routes if _matches(route.condition, context)), None)


@dataclass(frozen=True)
class PreviewRow:
    approval: ApprovalRequest
    matches: bool
    routed_to: str  # the group the tenant's current routes choose, "" for every approver


def preview_condition(*, tenant: Tenant, condition: str) -> list[PreviewRow]:
    """The condition, and the tenant's current routes, evaluated against its last 50 requests. Raises
    RoutingError for a condition that does not compile."""
    _check_condition(condition)
    recent = (
        ApprovalRequest.objects.filter(tenant=tenant)
        .select_related("call__run__agent", "call__run__tenant")
        .order_by("-created_at", "-id")[:PREVIEW_REQUESTS]
    )
    rows = []
    for approval in recent:
        context = routing_context(approval.call)
        route = route_for(tenant_id=tenant.pk, context=context)
        rows.append(
            PreviewRow(
                approval=approval, matches=_matches(condition, context), routed_to=route.group.name if route else ""
            )
        )
    return rows


def routing_of(call) -> dict:
    """The routing fields of the request a call opens: set once, as it opens; {} when no route matches."""
    route = route_for(tenant_id=call.run.tenant_id, context=routing_context(call))
    if route is None:
        return {}
    return {"group": route.group, "fallback_group": route.fallback_group, "route_name": route.name}


# --- groups -------------------------------------------------------------------------------------------


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise RoutingError("Give it a name.", code="name_required", field="name")
    if len(name) > NAME_MAX:
        raise RoutingError(f"A name has at most {NAME_MAX} characters.", code="name_too_long", field="name")
    return name


def create_group(*, tenant: Tenant, name: str, actor) -> ApproverGroup:
    name = _clean_name(name)
    try:
        with transaction.atomic():
            group = ApproverGroup.objects.create(tenant=tenant, name=name)
    except IntegrityError:
        raise RoutingError(
            f"{tenant.slug} already has a group named {name}.", code="duplicate_name", field="name"
        ) from None
    logger.info("approver group %s created in %s by %s", name, tenant.slug, actor)
    return group


def add_group_member(*, group: ApproverGroup, user, actor) -> ApproverGroup:
    """Only an approver of the group's tenant can be a member: routing narrows who decides, never widens it."""
    if (
        user is None
        or not user.is_active
        or not user.memberships.filter(tenant_id=group.tenant_id, role=Role.APPROVER).exists()
    ):
        raise RoutingError(
            f"Only approvers of {group.tenant.slug} can be in its approver groups.",
            code="not_an_approver",
            field="user",
        )
    group.members.add(user)
    logger.info("%s added to approver group %s by %s", user, group, actor)
    return group


def remove_group_member(*, group: ApproverGroup, user, actor) -> ApproverGroup:
    group.members.remove(user)
    logger.info("%s removed from approver group %s by %s", user, group, actor)
    return group


def delete_group(*, group: ApproverGroup, actor) -> None:
    """Refused while a route names the group or a pending request waits for it: deleting it would hand
    the request to every approver (or to nobody's route) without anyone deciding that."""
    if (
        ApprovalRoute.objects.filter(group=group).exists()
        or ApprovalRoute.objects.filter(fallback_group=group).exists()
    ):
        raise RoutingError(
            f"A route sends requests to {group.name}; change or delete the route first.", code="group_in_use"
        )
    if ApprovalRequest.objects.filter(group=group, status=ApprovalStatus.PENDING).exists():
        raise RoutingError(f"Requests routed to {group.name} are still pending.", code="group_has_pending")
    logger.info("approver group %s deleted by %s", group, actor)
    group.delete()


# --- routes -------------------------------------------------------------------------------------------


def _check_condition(condition: str) -> str:
    condition = (condition or "").strip()
    if len(condition) > CONDITION_MAX:
        message = f"A condition has at most {CONDITION_MAX} characters."
        raise RoutingError(message, code="invalid_condition", field="condition")
    problems = check_condition(condition)
    if problems:
        raise RoutingError(problems[0], code="invalid_condition", field="condition")
    return condition


def _group_of(tenant: Tenant, group: Any, field: str) -> ApproverGroup | None:
    if group is None:
        return None
    if not isinstance(group, ApproverGroup) or group.tenant_id != tenant.pk:
        raise RoutingError(f"No approver group of {tenant.slug} is named that.", code="unknown_group", field=field)
    return group


def save_route(
    *,
    tenant: Tenant,
    name: str,
    condition: str,
    group: Any,
    fallback_group: Any = None,
    route: ApprovalRoute | None = None,
    actor,
) -> ApprovalRoute:
    """Create a route (last in order) or change one; every field is checked before anything is written."""
    name = _clean_name(name)
    condition = _check_condition(condition)
    group = _group_of(tenant, group, "group")
    if group is None:
        raise RoutingError("Choose the group the route sends requests to.", code="group_required", field="group")
    fallback_group = _group_of(tenant, fallback_group, "fallback_group")
    if fallback_group is not None and fallback_group.pk == group.pk:
        raise RoutingError(
            "The fallback group must differ from the group.", code="same_fallback", field="fallback_group"
        )
    if route is None:
        last = ApprovalRoute.objects.filter(tenant=tenant).aggregate(last=Max("position"))["last"]
        route = ApprovalRoute(tenant=tenant, position=0 if last is None else last + 1)
    route.name, route.condition, route.group, route.fallback_group = name, condition, group, fallback_group
    try:
        with transaction.atomic():
            route.save()
    except IntegrityError:
        raise RoutingError(
            f"{tenant.slug} already has a route named {name}.", code="duplicate_name", field="name"
        ) from None
    logger.info("approval route %s saved in %s by %s", name, tenant.slug, actor)
    return route


def delete_route(*, route: ApprovalRoute, actor) -> None:
    logger.info("approval route %s deleted from %s by %s", route.name, route.tenant.slug, actor)
    route.delete()


def move_route(*, route: ApprovalRoute, to_position: int, actor) -> list[ApprovalRoute]:
    """Put the route at `to_position` (0 first) and number the tenant's routes 0, 1, 2... again."""
    with transaction.atomic():
        routes = list(
            ApprovalRoute.objects.select_for_update().filter(tenant_id=route.tenant_id).order_by("position", "id")
        )
        ordered = [r for r in routes if r.pk != route.pk]
        ordered.insert(max(0, min(to_position, len(ordered))), next(r for r in routes if r.pk == route.pk))
        for position, each in enumerate(ordered):
            if each.position != position:
                ApprovalRoute.objects.filter(pk=each.pk).update(position=position)
                each.position = position
    logger.info("approval route %s moved to %d by %s", route.name, to_position, actor)
    return ordered
