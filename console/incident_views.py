"""Console pages of the incident controls (tenant admins): suspend and resume an agent, freeze and
unfreeze the tenant. The run's Stop button lives on the run page (runs.views)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from console import services
from console.forms import FreezeTenantForm, SuspendAgentForm
from console.models import Role
from console.tenancy import tenant_for_user_or_404

RECENT_ACTIONS = 30


@login_required
@require_POST
def agent_suspend(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    form = SuspendAgentForm(request.POST)
    if form.is_valid():
        services.suspend_agent(agent=agent, by=request.user, reason=form.cleaned_data["reason"], duration=form.duration)
        messages.success(request, agent.suspension_notice())
    else:
        messages.error(request, "Not suspended: give a reason, and minutes as a whole number from 1 to 43200.")
    return redirect("console:agent_keys", tenant_slug=tenant.slug, agent_id=agent.pk)


@login_required
@require_POST
def agent_resume(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    services.resume_agent(agent=agent, by=request.user)
    messages.success(request, f"{agent.name} is resumed; its held approved calls run at their next look.")
    return redirect("console:agent_keys", tenant_slug=tenant.slug, agent_id=agent.pk)


def _controls_page(request: HttpRequest, tenant, form: FreezeTenantForm, status: int = 200) -> HttpResponse:
    context = {
        "tenant": tenant,
        "form": form,
        "suspended": [agent for agent in tenant.agents.filter(suspended_at__isnull=False)],
        "actions": tenant.operator_actions.all()[:RECENT_ACTIONS],
    }
    return render(request, "console/incident.html", context, status=status)


@login_required
@require_GET
def tenant_controls(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    return _controls_page(request, tenant, FreezeTenantForm())


@login_required
@require_POST
def tenant_freeze(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = FreezeTenantForm(request.POST)
    if not form.is_valid():
        return _controls_page(request, tenant, form, status=400)
    services.freeze_tenant(tenant=tenant, by=request.user, reason=form.cleaned_data["reason"])
    messages.success(request, f"{tenant.name} is frozen: only reads run until you unfreeze it.")
    return redirect("console:tenant_controls", tenant_slug=tenant.slug)


@login_required
@require_POST
def tenant_unfreeze(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    services.unfreeze_tenant(tenant=tenant, by=request.user)
    messages.success(request, f"{tenant.name} is unfrozen; writes run again.")
    return redirect("console:tenant_controls", tenant_slug=tenant.slug)
