from django.http import HttpRequest

from approvals.queries import pending_count
from console.tenancy import reads_decisions, tenants_for


def shell(request: HttpRequest) -> dict:
    """What the base layout needs on every page: the tenant switcher and the current tenant."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or getattr(user, "is_agent", False):
        return {}  # an agent's key opens a page (the API docs) with no person's shell around it
    return {
        "switchable_tenants": tenants_for(user),
        "current_tenant": getattr(request, "tenant", None),
        "current_roles": sorted(getattr(request, "tenant_roles", set())),
        "reads_decisions": reads_decisions(getattr(request, "tenant_roles", set())),
        "nav_admin_active": _url_name(request) in ADMIN_VIEWS,
        "pending_approvals": _pending_approvals(user),
    }


ADMIN_VIEWS = {
    "member_list",
    "member_edit",
    "invitation_create",
    "invitation_revoke",
    "agent_list",
    "agent_create",
    "agent_revoke",
    "agent_suspend",
    "agent_resume",
    "tenant_controls",
    "tenant_freeze",
    "tenant_unfreeze",
}


def _url_name(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    return match.url_name if match is not None and match.app_name == "console" else ""


def _pending_approvals(user) -> int:
    return pending_count(user)
