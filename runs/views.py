"""Console pages for runs: the list of a tenant's runs and one run's calls, verdicts and taint."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.tenancy import get_visible_or_404
from runs.models import Run, RunStatus, ToolCall

PAGE_SIZE = 50


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.visible_to(request.user).select_related("agent", "tenant", "snapshot")
    if request.tenant is not None:
        runs = runs.filter(tenant=request.tenant)
    status = request.GET.get("status", "")
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    if request.GET.get("tainted") == "1":
        runs = runs.filter(tainted=True)
    return render(request, "runs/list.html", {"runs": runs[:PAGE_SIZE], "status": status,
                                              "statuses": RunStatus.values, "tainted": request.GET.get("tainted")})


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id) -> HttpResponse:
    run = get_visible_or_404(Run.objects.select_related("agent", "tenant", "snapshot"), request.user, pk=run_id)
    calls = ToolCall.objects.filter(run=run).select_related("skill_version").order_by("created_at", "position")
    return render(request, "runs/detail.html", {"run": run, "calls": calls})
