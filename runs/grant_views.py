"""A grant's page for its tenant's admins: the grant, its change log, and before a revocation, what the
revocation would have refused (runs.grant_revocation). Beside the grants pages, in the layer that reads calls."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from console.models import Role
from console.tenancy import tenant_for_user_or_404
from policies.models import Grant, GrantEvent
from runs.grant_revocation import revocation_preview


@login_required
@require_GET
def grant_detail(request: HttpRequest, tenant_slug: str, grant_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    grant = get_object_or_404(Grant.objects.select_related("granted_by", "revoked_by"), pk=grant_id, tenant=tenant)
    context = {
        "tenant": tenant,
        "grant": grant,
        "events": GrantEvent.objects.filter(tenant=tenant, grant_ref=grant.pk),
        "preview": revocation_preview(grant) if grant.is_active else None,
        "reason_max_length": GrantEvent._meta.get_field("reason").max_length,
    }
    return render(request, "runs/grant.html", context)
