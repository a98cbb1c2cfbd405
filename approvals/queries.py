"""Read-side helpers shared by the inbox, the API, the nav badge and the dashboard card."""

from django.db.models import Count, Min, QuerySet

from approvals.models import ApprovalRequest, ApprovalStatus
from console.models import Role


def approvable(user) -> QuerySet[ApprovalRequest]:
    """Requests of every tenant where the user is an approver."""
    return ApprovalRequest.objects.visible_to(user, role=Role.APPROVER)


def pending_for(user, filters: dict | None = None) -> QuerySet[ApprovalRequest]:
    queryset = (
        approvable(user)
        .pending()
        .select_related("tenant", "agent", "call__skill_version")
        .prefetch_related("votes__user")
    )
    filters = filters or {}
    if filters.get("tenant"):
        queryset = queryset.filter(tenant__slug=filters["tenant"])
    if filters.get("agent"):
        queryset = queryset.filter(agent__name=filters["agent"])
    if filters.get("skill"):
        queryset = queryset.filter(skill_name__icontains=filters["skill"])
    if filters.get("effect"):
        queryset = queryset.filter(effect=filters["effect"])
    return queryset.order_by("-created_at", "-id")


def scheduled_for(user) -> QuerySet[ApprovalRequest]:
    """Approved calls still in their undo window, in the tenants where the user approves: next to run first."""
    return approvable(user).filter(status=ApprovalStatus.SCHEDULED).select_related("tenant").order_by("scheduled_for")


def pending_count(user) -> int:
    return approvable(user).pending().count() if user.is_authenticated else 0


def pending_by_tenant(user) -> list[dict]:
    return list(
        approvable(user)
        .pending()
        .values("tenant__slug")
        .annotate(count=Count("id"), oldest=Min("created_at"))
        .order_by("tenant__slug")
    )
