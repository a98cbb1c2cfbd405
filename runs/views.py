"""Console pages for runs: the list of a tenant's runs, one run's calls, verdicts and taint, and its Stop button."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.tenancy import get_visible_or_404, require_any_role, roles_in
from runs import lifecycle, services
from runs.forms import StopRunForm
from runs.models import LocalDecision, Run, RunStatus, ToolCall
from traces.models import Span

PAGE_SIZE = 50
TEXT_FILTERS = ("tenant", "agent", "end_user", "skill")


def _page_cursor(value: str) -> tuple[datetime, uuid.UUID] | None:
    """`before=<created_at>~<run id>` of the last run on the page before; anything else is the first page."""
    created, _, run_id = value.partition("~")
    try:
        at, pk = datetime.fromisoformat(created), uuid.UUID(run_id)
    except ValueError:
        return None
    return (at, pk) if at.tzinfo is not None else None


def _filter_runs(runs: QuerySet[Run], filters: dict[str, str]) -> QuerySet[Run]:
    """The list's filters; each narrows runs the caller already sees, none widens them."""
    if filters["tenant"]:
        runs = runs.filter(tenant__slug=filters["tenant"])
    if filters["agent"]:
        runs = runs.filter(agent__name=filters["agent"])
    if filters["end_user"]:
        runs = runs.filter(end_user=filters["end_user"])
    if filters["skill"]:
        runs = runs.filter(Exists(ToolCall.objects.filter(run=OuterRef("pk"), name=filters["skill"])))
    return runs


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    filters = {key: request.GET.get(key, "").strip()[:200] for key in TEXT_FILTERS}
    runs = Run.objects.visible_to(request.user).select_related("agent", "tenant", "snapshot")
    if request.tenant is not None and not filters["tenant"]:
        runs = runs.filter(tenant=request.tenant)
    runs = _filter_runs(runs, filters)
    status = request.GET.get("status", "")
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    if request.GET.get("tainted") == "1":
        runs = runs.filter(tainted=True)
    if request.GET.get("flagged") == "1":  # calls decided locally during an outage that today's policy refuses
        runs = runs.filter(Exists(LocalDecision.objects.filter(call__run=OuterRef("pk"), flagged=True)))
    before = _page_cursor(request.GET.get("before", ""))
    if before is not None:
        runs = runs.filter(Q(created_at__lt=before[0]) | Q(created_at=before[0], pk__lt=before[1]))
    page = list(runs.order_by("-created_at", "-pk")[: PAGE_SIZE + 1])
    query = request.GET.copy()
    query.pop("before", None)
    filter_query, older_query = query.urlencode(), ""
    if len(page) > PAGE_SIZE:
        page = page[:PAGE_SIZE]
        query["before"] = f"{page[-1].created_at.isoformat()}~{page[-1].pk}"
        older_query = query.urlencode()
    return render(
        request,
        "runs/list.html",
        {
            "runs": page,
            "older_query": older_query,
            "filter_query": filter_query,
            "paged": before is not None,
            "status": status,
            "filters": filters,
            "statuses": RunStatus.values,
            "tainted": request.GET.get("tainted"),
            "flagged": request.GET.get("flagged"),
        },
    )


def _get_run_for_user(request: HttpRequest, run_id) -> Run:
    return get_visible_or_404(
        Run.objects.select_related("agent", "tenant", "snapshot", "trace"), request.user, pk=run_id
    )


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id) -> HttpResponse:
    run = _get_run_for_user(request, run_id)
    calls = (
        ToolCall.objects.filter(run=run)
        .select_related("skill_version", "approval", "local")
        .annotate(has_spans=Exists(Span.objects.filter(call=OuterRef("pk"))))
        .order_by("created_at", "position")
    )
    may_stop = lifecycle.is_open(run.status) and bool(roles_in(request.user, run.tenant) & set(services.RUN_STOPPERS))
    return render(
        request, "runs/detail.html", {"run": run, "calls": calls, "may_stop": may_stop, "stop_form": StopRunForm()}
    )


@login_required
@require_POST
def run_stop(request: HttpRequest, run_id) -> HttpResponse:
    run = _get_run_for_user(request, run_id)
    require_any_role(request.user, run.tenant, services.RUN_STOPPERS)
    form = StopRunForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not stopped: give the reason for stopping the run.")
        return redirect("runs:run_detail", run_id=run.pk)
    try:
        services.stop_run(run=run, by=request.user, reason=form.cleaned_data["reason"])
        messages.success(
            request, "Run stopped: its pending approvals are cancelled and the agent's next call is refused."
        )
    except services.RunAlreadyClosed as exc:
        messages.error(request, str(exc))
    return redirect("runs:run_detail", run_id=run.pk)
