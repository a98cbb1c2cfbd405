"""The one place that decides which tenants and teams a person or an agent may see and act for.

Every view, API endpoint and websocket consumer scopes tenant data through these helpers.
Objects of a tenant the caller cannot see are reported as missing (404), never as forbidden,
so that identifiers do not leak across tenants; a member lacking a role gets 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest

from console.models import Agent, Membership, Role, Team, Tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    AnyUser = AbstractBaseUser | AnonymousUser

SESSION_TENANT_KEY = "airlock_tenant"


def is_platform_admin(user: AnyUser) -> bool:
    return bool(user.is_authenticated and user.is_superuser)


def tenants_for(user: AnyUser, role: str | None = None) -> models.QuerySet[Tenant]:
    """Tenants the user may see (any membership: every role can view), or act for with `role`."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(pk__in=_memberships(user, role).values("tenant_id"))


def tenant_ids_for(user: AnyUser, role: str | None = None) -> set[int]:
    """The ids of `tenants_for(user, role)`. A member's come straight from the membership rows, unordered
    (their default order joins the tenant and the user): the approvers' websocket asks at connect."""
    if not user.is_authenticated or user.is_superuser:
        return set(tenants_for(user, role).values_list("pk", flat=True))
    return set(_memberships(user, role).order_by().values_list("tenant_id", flat=True))


def tenants_covered(role: str, tenant_ids: set[int]) -> models.Expression:
    """An annotation for a queryset of users: in how many of `tenant_ids` each may act with `role`, as
    `tenant_ids_for` decides it (a superuser in every tenant that exists). Read in the same query as the
    user, so that a check before every message costs one round trip (approvals.consumers)."""
    if not tenant_ids:
        return models.Value(0)
    existing = Tenant.objects.filter(pk__in=tenant_ids).order_by().values(n=models.Func("pk", function="COUNT"))
    member_of = models.Count(
        "memberships__tenant",
        filter=models.Q(memberships__role=role, memberships__tenant__in=tenant_ids),
        distinct=True,
    )
    return models.Case(models.When(is_superuser=True, then=models.Subquery(existing)), default=member_of)


def _memberships(user: AnyUser, role: str | None) -> models.QuerySet[Membership]:
    memberships = Membership.objects.filter(user=user)
    return memberships if role is None else memberships.filter(role=role)


def roles_in(user: AnyUser, tenant: Tenant) -> set[str]:
    if not user.is_authenticated:
        return set()
    if user.is_superuser:
        return {choice.value for choice in Role}
    return set(Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True))


def has_role(user: AnyUser, tenant: Tenant, role: str) -> bool:
    return role in roles_in(user, tenant)


class RoleRequired(PermissionDenied):
    """A member of `tenant` lacks `role`: the 403 page names both and the tenant's admins, who could grant it."""

    def __init__(self, *, role: str, tenant: Tenant) -> None:
        super().__init__(f"You need the {role} role in {tenant.slug} for this.")
        self.role = role
        self.tenant = tenant


def require_role(user: AnyUser, tenant: Tenant, role: str) -> None:
    """403 for a member without the role; callers have already 404ed non-members."""
    if not has_role(user, tenant, role):
        raise RoleRequired(role=role, tenant=tenant)


# Who reads a tenant's decision history (approvals.decisions): its admins, and auditors, who read it and what
# it links to and change nothing (every write asks for another role).
DECISION_READER_ROLES = (Role.ADMIN, Role.AUDITOR)


def decision_reader_tenant_ids(user: AnyUser) -> set[int]:
    """The tenants whose decision history the user may read."""
    return set().union(*(tenant_ids_for(user, role) for role in DECISION_READER_ROLES))


def reads_decisions(roles: set[str]) -> bool:
    """Whether these roles in a tenant open its decision history."""
    return bool(roles & set(DECISION_READER_ROLES))


def may_read_decisions(user: AnyUser, tenant: Tenant) -> bool:
    return reads_decisions(roles_in(user, tenant))


def decision_reader_tenant_or_404(user: AnyUser, slug: str) -> Tenant:
    """A tenant the user belongs to (else 404) whose decision history they may read (else 403)."""
    tenant = tenant_for_user_or_404(user, slug)
    if not may_read_decisions(user, tenant):
        raise RoleRequired(role="admin or auditor", tenant=tenant)
    return tenant


def require_any_role(user: AnyUser, tenant: Tenant, roles: tuple[str, ...]) -> None:
    """403 for a member holding none of `roles` (named after the first); callers have already 404ed non-members."""
    if not roles_in(user, tenant) & set(roles):
        raise RoleRequired(role=roles[0], tenant=tenant)


def tenant_admins(tenant: Tenant) -> list[AbstractBaseUser]:
    """The people who hold the admin role in a tenant: who can give a member a role."""
    return [
        membership.user
        for membership in Membership.objects.filter(tenant=tenant, role=Role.ADMIN)
        .select_related("user")
        .order_by("user__username")
    ]


def teams_for(user: AnyUser) -> models.QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    if user.is_superuser:
        return Team.objects.all()
    return Team.objects.filter(members=user)


class TenantScopedQuerySet(models.QuerySet):
    """Base queryset for tenant-owned rows. Subclasses name the path to the tenant in `tenant_field`."""

    tenant_field = "tenant"

    def in_tenants(self, tenant_ids: Any) -> TenantScopedQuerySet:
        return self.filter(**{f"{self.tenant_field}__in": tenant_ids})

    def visible_to(self, user: AnyUser, role: str | None = None) -> TenantScopedQuerySet:
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser and role is None:
            return self.all()
        return self.in_tenants(tenants_for(user, role).values("pk"))

    def hidden_from(self, user: AnyUser) -> TenantScopedQuerySet:
        """The rows `visible_to(user)` leaves out (rows with no tenant included). Pages that cover every
        tenant (a skill policy's simulation, discovery misses) may count these, never show or probe them."""
        if user.is_authenticated and user.is_superuser:
            return self.none()
        if not user.is_authenticated:
            return self.all()
        return self.exclude(**{f"{self.tenant_field}__in": tenants_for(user).values("pk")})

    def for_agent(self, agent: Agent) -> TenantScopedQuerySet:
        return self.filter(**{self.tenant_field: agent.tenant_id})


def get_visible_or_404(queryset: models.QuerySet, user: AnyUser, **lookup: Any) -> Any:
    """Fetch one object of a tenant the user can see; anything else is a 404."""
    try:
        return queryset.visible_to(user).get(**lookup)
    except (queryset.model.DoesNotExist, ValueError, TypeError):
        raise Http404(f"No {queryset.model._meta.verbose_name} matches the given query.") from None


def tenant_for_user_or_404(user: AnyUser, slug: str, role: str | None = None) -> Tenant:
    """A tenant the user belongs to; with `role`, a non-member gets 404 and a member without it 403."""
    try:
        tenant = tenants_for(user).get(slug=slug)
    except Tenant.DoesNotExist:
        raise Http404("No such tenant.") from None
    if role is not None:
        require_role(user, tenant, role)
    return tenant


class CurrentTenantMiddleware:
    """Attach the tenant chosen in the tenant switcher (`request.tenant`) and the user's roles in it."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        request.tenant = None
        request.tenant_roles = set()
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not request.path.startswith(("/api/", "/v1/")):
            visible = tenants_for(user)
            slug = request.session.get(SESSION_TENANT_KEY)
            tenant = visible.filter(slug=slug).first() if slug else None
            request.tenant = tenant or visible.first()
            if request.tenant is not None:
                request.tenant_roles = roles_in(user, request.tenant)
        return self.get_response(request)
