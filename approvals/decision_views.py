"""A tenant's decision history for its admins and auditors: the page and its CSV / JSON Lines export."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from approvals.decisions import EXPORTS, audit_lines, decision_row, decisions_in
from approvals.forms import DecisionFilterForm
from console.tenancy import decision_reader_tenant_or_404

PAGE_SIZE = 50


@login_required
@require_GET
def decision_history(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = decision_reader_tenant_or_404(request.user, tenant_slug)
    form = DecisionFilterForm(request.GET)
    context = {"tenant": tenant, "form": form, "page": None, "rows": [], "query": ""}
    if not form.is_valid():
        return render(request, "approvals/decision_history.html", context, status=400)
    page = Paginator(decisions_in([tenant.pk], form.cleaned_data), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context.update(page=page, rows=[decision_row(event) for event in page], query=query.urlencode())
    return render(request, "approvals/decision_history.html", context)


@login_required
@require_GET
def decision_export(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """The filtered history as `?format=csv` (the default) or `?format=jsonl`, streamed; `?format=audit`: the
    tenant's whole audit chain with its signed checkpoints and its grants change log (JSON Lines)."""
    tenant = decision_reader_tenant_or_404(request.user, tenant_slug)
    form = DecisionFilterForm(request.GET)
    export_format = request.GET.get("format", "csv")
    if export_format == "audit":
        response = StreamingHttpResponse(audit_lines(tenant.pk), content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="audit-{tenant.slug}-{timezone.now():%Y%m%d-%H%M%S}.jsonl"'
        )
        return response
    if export_format not in EXPORTS:
        return HttpResponse("format: choose csv, jsonl or audit.", status=400, content_type="text/plain")
    if not form.is_valid():
        return HttpResponse(form.error_summary(), status=400, content_type="text/plain")
    lines, content_type = EXPORTS[export_format]
    response = StreamingHttpResponse(lines(decisions_in([tenant.pk], form.cleaned_data)), content_type=content_type)
    filename = f"decisions-{tenant.slug}-{timezone.now():%Y%m%d-%H%M%S}.{export_format}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
