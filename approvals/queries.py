"""Read-side helpers shared by the inbox, the API, the nav badge and the dashboard card."""

from django.db.models import Count, Min, QuerySet

from approvals.models import ApprovalRequest, ApprovalStatus
from console.tenancy import decision_reader_tenant_ids

GROUP_MINE = "mine"
GROUP_ALL = "all"


def approvable(user, *, everything: bool = False) -> QuerySet[ApprovalRequest]:
    """Requests routed to the user in every tenant where they are an approver; with `everything`, also all
    the requests of the tenants they administer (the inbox's and the API's `group=all`)."""
    return ApprovalRequest.objects.routed_to(user, everything=everything)


def routed_among(user, approvals) -> set[int]:
    """The ids of `approvals` routed to the user: in an admin's oversight list, the ones they may decide."""
    return set(approvable(user).filter(pk__in=[a.pk for a in approvals]).values_list("pk", flat=True))


def pending_for(user, filters: dict | None = None) -> QuerySet[ApprovalRequest]:
    filters = filters or {}
    queryset = (
        approvable(user, everything=filters.get("group") == GROUP_ALL)
        .pending()
        .select_related("tenant", "agent", "call__skill_version", "group", "fallback_group")
        .prefetch_related("votes__user")
    )
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


def recently_decided(user, *, everything: bool = False) -> QuerySet[ApprovalRequest]:
    """Decided requests newest first: those routed to the user, and every decision of the tenants whose
    decisions they read (admins and auditors, as on the Decisions page)."""
    readable = ApprovalRequest.objects.filter(tenant_id__in=decision_reader_tenant_ids(user))
    mine = approvable(user, everything=everything)
    return (mine | readable).decided().select_related("tenant").order_by("-decided_at", "-id")
