"""The home page: every app's dashboard cards and the invitations waiting for this user."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from airlock import dashboard
from console.models import Invitation, Role
from console.tenancy import teams_for, tenant_ids_for


@login_required
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    invitations = Invitation.objects.pending().addressed_to(request.user).select_related("tenant", "invited_by")
    return render(
        request,
        "console/home.html",
        {
            "cards": dashboard.cards_for(request.user),
            "is_approver": bool(tenant_ids_for(request.user, Role.APPROVER)),
            "invitations": invitations,
            "in_a_team": teams_for(request.user).exists(),
        },
    )
