"""Console pages of traces: list, timeline (with span and "why" panels), skill pages, alerts, settings."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.models import Role
from console.tenancy import tenant_for_user_or_404, tenant_ids_for
from traces import services
from traces.access import may_see_skill, owned_skill_names, readable_traces, trace_access_or_404
from traces.forms import AlertRuleForm, TraceFilterForm, TraceSettingsForm
from traces.metrics import WINDOWS, skill_metrics
from traces.models import Alert, AlertRule, Span
from traces.timeline import PAGE_SIZE
from traces.why import explain_call

LIST_PAGE = 50


# --- list --------------------------------------------------------------------------------------


def _encode_cursor(trace) -> str:
    return base64.urlsafe_b64encode(f"{trace.started_at.isoformat()}|{trace.pk}".encode()).decode()


def _apply_cursor(traces: QuerySet, cursor: str) -> QuerySet:
    try:
        stamp, pk = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        moment = datetime.fromisoformat(stamp)
        return traces.filter(Q(started_at__lt=moment) | Q(started_at=moment, pk__lt=int(pk)))
    except (ValueError, UnicodeDecodeError):
        raise Http404("Bad cursor.") from None


def _filter_traces(traces: QuerySet, data: dict, user) -> QuerySet:
    if data.get("tenant"):
        traces = traces.filter(tenant__slug=data["tenant"])
    if data.get("agent"):
        traces = traces.filter(agent__name=data["agent"])
    if data.get("end_user"):  # within the viewer's own tenants: elsewhere a hit would confirm a guessed end user
        traces = traces.visible_to(user).filter(end_user=data["end_user"])
    if data.get("since"):
        traces = traces.filter(started_at__gte=data["since"])
    if data.get("until"):
        traces = traces.filter(started_at__lt=data["until"])
    span_filter = {
        field: data[key]
        for key, field in (
            ("skill", "skill_name"),
            ("verdict", "verdict"),
            ("outcome", "outcome"),
            ("error_class", "error_class"),
        )
        if data.get(key)
    }
    if span_filter:
        traces = traces.filter(Exists(Span.objects.filter(trace=OuterRef("pk"), **span_filter)))
    return traces


@login_required
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    form = TraceFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    traces = _filter_traces(readable_traces(request.user), data, request.user).select_related("tenant", "agent")
    traces = traces.order_by("-started_at", "-pk")
    if request.GET.get("cursor"):
        traces = _apply_cursor(traces, request.GET["cursor"])
    page = list(traces[: LIST_PAGE + 1])
    member_of = tenant_ids_for(request.user) if not request.user.is_superuser else None
    rows = [{"trace": t, "full": member_of is None or t.tenant_id in member_of} for t in page[:LIST_PAGE]]
    query = request.GET.copy()
    next_url = ""
    if len(page) > LIST_PAGE:
        query["cursor"] = _encode_cursor(page[LIST_PAGE - 1])
        next_url = f"?{query.urlencode()}"
    return render(
        request,
        "traces/list.html",
        {"form": form, "rows": rows, "next_url": next_url, "owned_skills": owned_skill_names(request.user)},
    )


# --- one trace ---------------------------------------------------------------------------------


@login_required
@require_GET
def trace_detail(request: HttpRequest, pk: int) -> HttpResponse:
    access = trace_access_or_404(request.user, pk)
    timeline = access.timeline()
    try:
        offset = max(int(request.GET.get("offset", 0)), 0)
    except ValueError:
        offset = 0
    span_base = reverse("traces:span", args=[pk, "0"])[:-2]  # rows append their span id: one reverse, not 300
    context = {
        "access": access,
        "trace": access.trace,
        "timeline": timeline,
        "span_base": span_base,
        "rows": timeline.page(offset),
        "next_offset": offset + PAGE_SIZE if offset + PAGE_SIZE < timeline.total else None,
    }
    if request.htmx and offset:
        return render(request, "traces/detail.html#rows", context)
    return render(request, "traces/detail.html", context)


@login_required
@require_GET
def trace_for_run(request: HttpRequest, run_id: str) -> HttpResponse:
    """`/traces/runs/<run id>/`: other pages link a run to its timeline without knowing the trace row."""
    trace = readable_traces(request.user).filter(run_id=run_id).values_list("pk", flat=True).first()
    if trace is None:
        raise Http404("No trace for this run.")
    return redirect("traces:detail", pk=trace)


@login_required
@require_GET
def span_detail(request: HttpRequest, pk: int, span_id: str) -> HttpResponse:
    access = trace_access_or_404(request.user, pk)
    span = get_object_or_404(access.spans().select_related("call", "call__approval"), span_id=span_id)
    span.name = access.shown_name(span)
    attributes = sorted(access.shown_attributes(span.attributes).items())
    return render(
        request,
        "traces/detail.html#span",
        {
            "access": access,
            "trace": access.trace,
            "span": span,
            "attributes": attributes,
            "approval_id": _approval_id(span),
            "owned_skills": owned_skill_names(request.user),
        },
    )


def _approval_id(span: Span) -> str:
    """The approval request a span belongs to: named in its attributes, or the one its call needed."""
    named = span.attributes.get("approval_id") or span.attributes.get("airlock.approval.id")
    if named:
        return str(named)
    approval = getattr(span.call, "approval", None) if span.call is not None else None
    return str(approval.pk) if approval is not None else ""


@login_required
@require_GET
def call_why(request: HttpRequest, pk: int, call_pk: int) -> HttpResponse:
    access = trace_access_or_404(request.user, pk)
    spans = list(access.spans().filter(call_id=call_pk))
    if not spans:
        raise Http404("No such call on this trace.")
    call = spans[0].call
    answers = explain_call(call=call, spans=spans, full=access.full)
    context = {"access": access, "trace": access.trace, "call": call, "answers": answers}
    if request.htmx:
        return render(request, "traces/detail.html#why", context)
    return render(request, "traces/why.html", context)  # a link from the run page: the panel as a page


# --- skills and alerts -------------------------------------------------------------------------


def _skill_or_404(user, skill_name: str) -> str:
    if not may_see_skill(user, skill_name):
        raise Http404("No such skill.")
    return skill_name


@login_required
@require_GET
def skill_detail(request: HttpRequest, skill_name: str) -> HttpResponse:
    _skill_or_404(request.user, skill_name)
    window = request.GET.get("window") if request.GET.get("window") in WINDOWS else "24h"
    until = timezone.now()
    metrics = skill_metrics(skill_name=skill_name, since=until - WINDOWS[window], until=until)
    return render(
        request,
        "traces/skill.html",
        {
            "skill_name": skill_name,
            "window": window,
            "windows": list(WINDOWS),
            "m": metrics,
            "rules": AlertRule.objects.filter(skill_name=skill_name),
            "alerts": Alert.objects.filter(skill_name=skill_name)[:10],
            "rule_form": AlertRuleForm(),
        },
    )


@login_required
@require_GET
def alert_list(request: HttpRequest) -> HttpResponse:
    skills = None if request.user.is_superuser else owned_skill_names(request.user)
    alerts = Alert.objects.select_related("rule")
    rules = AlertRule.objects.all()
    if skills is not None:
        alerts, rules = alerts.filter(skill_name__in=skills), rules.filter(skill_name__in=skills)
    return render(request, "traces/alerts.html", {"alerts": alerts[:200], "rules": rules, "skills": skills})


@login_required
@require_POST
def rule_create(request: HttpRequest, skill_name: str) -> HttpResponse:
    _skill_or_404(request.user, skill_name)
    form = AlertRuleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("traces:skill", skill_name=skill_name)
    services.create_alert_rule(
        skill_name=skill_name,
        kind=form.cleaned_data["kind"],
        threshold=form.cleaned_data["threshold"],
        window=form.window_value,
        min_calls=form.cleaned_data.get("min_calls") or 1,
        user=request.user,
    )
    messages.success(request, "Alert rule added.")
    return redirect("traces:skill", skill_name=skill_name)


@login_required
@require_POST
def rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    _skill_or_404(request.user, rule.skill_name)
    services.delete_alert_rule(rule=rule)
    messages.success(request, "Alert rule deleted.")
    return redirect("traces:skill", skill_name=rule.skill_name)


# --- tenant settings ---------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def tenant_settings(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    current = services.trace_settings_for(tenant)
    initial = {
        "retention_days": tenant.trace_retention.days,
        "context_budget": tenant.default_context_budget,
        "forward_enabled": current.forward_enabled,
        "forward_endpoint": current.forward_endpoint,
    }
    form = TraceSettingsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        services.update_trace_settings(
            tenant=tenant,
            forward_enabled=data["forward_enabled"],
            forward_endpoint=data["forward_endpoint"],
            forward_headers=data["forward_headers"],
            retention=timedelta(days=data["retention_days"]),
            context_budget=data["context_budget"],
        )
        messages.success(request, "Trace settings saved.")
        return redirect("traces:settings", tenant_slug=tenant.slug)
    return render(
        request,
        "traces/settings.html",
        {"tenant": tenant, "form": form, "settings": current},
        status=400 if request.method == "POST" else 200,
    )
