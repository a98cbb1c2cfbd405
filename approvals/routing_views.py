"""The console's Approval routing page, for a tenant's admins: approver groups and their members, the
ordered routes, and a preview of a condition against the tenant's last 50 requests. Every write is a
POST through approvals.routing_rules; a refused change re-renders the page with the reason (400)."""

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from approvals import routing_rules
from approvals.forms import ApprovalRouteForm, ApproverGroupForm, GroupMemberForm, RouteMoveForm
from approvals.models import ApprovalRoute, ApproverGroup
from console.models import Role
from console.tenancy import get_visible_or_404, require_role, tenant_for_user_or_404


def _get_admin_object(queryset, user, pk: int):
    """A group or route of a tenant the user sees (else 404) and administers (else 403)."""
    found = get_visible_or_404(queryset.select_related("tenant"), user, pk=pk)
    require_role(user, found.tenant, Role.ADMIN)
    return found


def _page(request: HttpRequest, tenant, *, route_form=None, editing=None, error: str = "", status: int = 200):
    groups = list(ApproverGroup.objects.filter(tenant=tenant).prefetch_related("members"))
    approvers = list(
        get_user_model()
        .objects.filter(memberships__tenant=tenant, memberships__role=Role.APPROVER, is_active=True)
        .distinct()
        .order_by("username")
    )
    for group in groups:  # who can still be added: the tenant's approvers not in the group yet
        members = {member.pk for member in group.members.all()}
        group.candidates = [user for user in approvers if user.pk not in members]
    condition = request.GET.get("preview", "").strip()
    preview, preview_error = [], ""
    if condition:
        try:
            preview = routing_rules.preview_condition(tenant=tenant, condition=condition)
        except routing_rules.RoutingError as exc:
            preview_error = str(exc)
    context = {
        "tenant": tenant,
        "groups": groups,
        "routes": ApprovalRoute.objects.filter(tenant=tenant).select_related("group", "fallback_group"),
        "group_form": ApproverGroupForm(),
        "route_form": route_form or ApprovalRouteForm(tenant=tenant),
        "editing": editing,
        "preview_condition": condition,
        "preview": preview,
        "preview_matches": sum(1 for row in preview if row.matches),
        "preview_error": preview_error,
        "error": error,
    }
    return render(request, "approvals/routing.html", context, status=status)


@login_required
@require_safe
def routing(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    editing = None
    if request.GET.get("edit", "").isdigit():
        editing = ApprovalRoute.objects.filter(tenant=tenant, pk=int(request.GET["edit"])).first()
    initial = (
        {
            "name": editing.name,
            "condition": editing.condition,
            "group": editing.group_id,
            "fallback_group": editing.fallback_group_id,
        }
        if editing
        else {"condition": request.GET.get("preview", "")}
    )
    return _page(request, tenant, route_form=ApprovalRouteForm(tenant=tenant, initial=initial), editing=editing)


def _back(tenant) -> HttpResponse:
    return redirect("approvals:routing", tenant_slug=tenant.slug)


@login_required
@require_POST
def group_create(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    form = ApproverGroupForm(request.POST)
    if not form.is_valid():
        return _page(request, tenant, error="Give the group a name (at most 100 characters).", status=400)
    try:
        group = routing_rules.create_group(tenant=tenant, name=form.cleaned_data["name"], actor=request.user)
    except routing_rules.RoutingError as exc:
        return _page(request, tenant, error=str(exc), status=400)
    messages.success(request, f"Group {group.name} created; add its approvers.")
    return _back(tenant)


@login_required
@require_POST
def group_members(request: HttpRequest, group_id: int) -> HttpResponse:
    group = _get_admin_object(ApproverGroup.objects, request.user, group_id)
    form = GroupMemberForm(request.POST)
    if not form.is_valid():
        return _page(request, group.tenant, error="Choose an approver.", status=400)
    user = get_user_model().objects.filter(pk=form.cleaned_data["user"]).first()
    try:
        if form.cleaned_data["action"] == "add":
            routing_rules.add_group_member(group=group, user=user, actor=request.user)
        elif user is not None:
            routing_rules.remove_group_member(group=group, user=user, actor=request.user)
    except routing_rules.RoutingError as exc:
        return _page(request, group.tenant, error=str(exc), status=400)
    return _back(group.tenant)


@login_required
@require_POST
def group_delete(request: HttpRequest, group_id: int) -> HttpResponse:
    group = _get_admin_object(ApproverGroup.objects, request.user, group_id)
    try:
        routing_rules.delete_group(group=group, actor=request.user)
    except routing_rules.RoutingError as exc:
        return _page(request, group.tenant, error=str(exc), status=400)
    messages.success(request, f"Group {group.name} deleted.")
    return _back(group.tenant)


def _save_route(request: HttpRequest, tenant, route: ApprovalRoute | None) -> HttpResponse:
    form = ApprovalRouteForm(request.POST, tenant=tenant)
    if not form.is_valid():
        return _page(request, tenant, route_form=form, editing=route, status=400)
    try:
        saved = routing_rules.save_route(tenant=tenant, route=route, actor=request.user, **form.cleaned_data)
    except routing_rules.RoutingError as exc:
        form.add_error(exc.field or None, str(exc))
        return _page(request, tenant, route_form=form, editing=route, status=400)
    messages.success(request, f"Route {saved.name} saved.")
    return _back(tenant)


@login_required
@require_POST
def route_create(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    return _save_route(request, tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN), None)


@login_required
@require_POST
def route_update(request: HttpRequest, route_id: int) -> HttpResponse:
    route = _get_admin_object(ApprovalRoute.objects, request.user, route_id)
    return _save_route(request, route.tenant, route)


@login_required
@require_POST
def route_delete(request: HttpRequest, route_id: int) -> HttpResponse:
    route = _get_admin_object(ApprovalRoute.objects, request.user, route_id)
    routing_rules.delete_route(route=route, actor=request.user)
    messages.success(request, f"Route {route.name} deleted.")
    return _back(route.tenant)


@login_required
@require_POST
def route_move(request: HttpRequest, route_id: int) -> HttpResponse:
    route = _get_admin_object(ApprovalRoute.objects, request.user, route_id)
    form = RouteMoveForm(request.POST)
    if not form.is_valid():
        return _page(request, route.tenant, error="The position is a whole number, 0 for first.", status=400)
    routing_rules.move_route(route=route, to_position=form.cleaned_data["position"], actor=request.user)
    return _back(route.tenant)
