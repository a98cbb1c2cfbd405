from django.http import HttpRequest

from console.tenancy import tenants_for


def shell(request: HttpRequest) -> dict:
    """What the base layout needs on every page: the tenant switcher and the current tenant."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "switchable_tenants": tenants_for(user),
        "current_tenant": getattr(request, "tenant", None),
        "current_roles": getattr(request, "tenant_roles", set()),
        "pending_approvals": _pending_approvals(user),
    }


def _pending_approvals(user) -> int:
    from approvals.queries import pending_count

    return pending_count(user)
