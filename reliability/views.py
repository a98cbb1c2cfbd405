"""Console pages of the execution plane: reconciliation inbox, tenant credentials, MCP servers."""

from __future__ import annotations

import difflib
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.models import Role, Team
from console.tenancy import get_visible_or_404, has_role, is_platform_admin, teams_for, tenant_for_user_or_404
from lib.egress import describe_failure
from lib.endpoints import endpoint_of
from registry.models import Skill, SkillVersion, VersionStatus
from registry.offering import offers_tenant
from reliability import services
from reliability.forms import (
    CredentialBindingForm,
    CredentialForm,
    McpServerForm,
    McpServerProposalForm,
    McpServerShareForm,
    ResolveForm,
)
from reliability.models import (
    Credential,
    CredentialAudit,
    CredentialBinding,
    McpServer,
    McpToolPin,
    ReconciliationItem,
    ReconciliationStatus,
)

PAGE_SIZE = 100
AUDIT_ROWS = 50


def can_resolve(user, item: ReconciliationItem) -> bool:
    """Tenant admins, and members of the team that owns the skill."""
    if has_role(user, item.tenant, Role.ADMIN):
        return True
    skill = Skill.objects.filter(name=item.skill_name).select_related("owner_team").first()
    return skill is not None and skill.is_owned_by(user)


def _item_for_user(request: HttpRequest, item_id: int) -> ReconciliationItem:
    return get_visible_or_404(
        ReconciliationItem.objects.select_related("tenant", "run", "call", "resolved_by"), request.user, pk=item_id
    )


@login_required
@require_GET
def reconciliation_list(request: HttpRequest) -> HttpResponse:
    items = ReconciliationItem.objects.visible_to(request.user).select_related("tenant", "call")
    if request.tenant is not None:
        items = items.filter(tenant=request.tenant)
    status = request.GET.get("status", ReconciliationStatus.OPEN)
    if status in ReconciliationStatus.values:
        items = items.filter(status=status)
    return render(
        request,
        "reliability/reconciliation_list.html",
        {"items": items[:PAGE_SIZE], "status": status, "statuses": ReconciliationStatus.values},
    )


@login_required
@require_GET
def reconciliation_detail(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item_for_user(request, item_id)
    return render(
        request,
        "reliability/reconciliation_detail.html",
        {"item": item, "form": ResolveForm(), "can_resolve": can_resolve(request.user, item)},
    )


@login_required
@require_POST
def reconciliation_resolve(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item_for_user(request, item_id)
    if not can_resolve(request.user, item):
        raise PermissionDenied("Only the skill's owners and tenant admins resolve unknown outcomes.")
    form = ResolveForm(request.POST)
    if not form.is_valid():
        return render(
            request,
            "reliability/reconciliation_detail.html",
            {"item": item, "form": form, "can_resolve": True},
            status=400,
        )
    try:
        services.resolve_item(item=item, user=request.user, **form.cleaned_data)
        messages.success(request, "Resolved; the run and its trace now show the outcome.")
    except services.AlreadyResolved:
        messages.warning(request, "Someone resolved this item first.")
    return redirect("reliability:reconciliation_detail", item_id=item.pk)


def credential_requests(tenant, name: str, bindings: list[CredentialBinding]) -> list[dict]:
    """The skill versions (active, deprecated or in review) that ask for this tenant's credential `name`,
    each with the endpoint it would go to and whether a binding lets it."""
    versions = (
        SkillVersion.objects.filter(
            manifest__execution__credential=name,
            status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED, VersionStatus.IN_REVIEW],
        )
        .select_related("skill")
        .order_by("skill__name", "-major", "-minor", "-patch")
    )
    rows = []
    for version in versions:
        if not offers_tenant(version.manifest, tenant.slug):
            continue
        endpoint = endpoint_of(str(version.manifest.get("execution", {}).get("adapter", "")))
        rows.append(
            {
                "version": version,
                "endpoint": endpoint,
                "bound": any(b.covers(skill_name=version.skill.name, endpoint=endpoint) for b in bindings),
            }
        )
    return rows


def _credentials_page(
    request: HttpRequest,
    tenant,
    *,
    form: CredentialForm | None = None,
    bind_forms: dict | None = None,
    status: int = 200,
) -> HttpResponse:
    credentials = list(Credential.objects.filter(tenant=tenant).defer("sealed_value"))
    bindings = list(CredentialBinding.objects.filter(tenant=tenant).select_related("created_by"))
    bind_forms = bind_forms or {}
    groups = [
        {
            "name": name,
            "credentials": [c for c in credentials if c.name == name],
            "bindings": [b for b in bindings if b.credential_name == name],
            "requests": credential_requests(tenant, name, [b for b in bindings if b.credential_name == name]),
            "bind_form": bind_forms.get(name) or CredentialBindingForm(auto_id=f"id_bind_{name}_%s"),
        }
        for name in sorted({c.name for c in credentials})
    ]
    audit = CredentialAudit.objects.filter(tenant=tenant).select_related("actor")[:AUDIT_ROWS]
    return render(
        request,
        "reliability/credentials.html",
        {"tenant": tenant, "groups": groups, "form": form or CredentialForm(), "audit": audit},
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
def credential_list(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    form = CredentialForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        services.save_credential(tenant=tenant, user=request.user, **form.cleaned_data)
        messages.success(
            request,
            f"Saved {form.cleaned_data['name']}; the value is sealed and will not be shown. "
            "Bind it to the skills and hosts that may use it.",
        )
        return redirect("reliability:credential_list", tenant_slug=tenant.slug)
    return _credentials_page(request, tenant, form=form, status=400 if form.errors else 200)


@login_required
@require_POST
def credential_delete(request: HttpRequest, tenant_slug: str, credential_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    credential = get_object_or_404(Credential, tenant=tenant, pk=credential_id)
    services.delete_credential(credential=credential, user=request.user)
    messages.success(request, "Credential deleted.")
    return redirect("reliability:credential_list", tenant_slug=tenant.slug)


@login_required
@require_POST
def credential_bind(request: HttpRequest, tenant_slug: str, credential_id: int) -> HttpResponse:
    """A tenant admin lets one credential go with some skills to one endpoint."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    credential = get_object_or_404(Credential, tenant=tenant, pk=credential_id)
    form = CredentialBindingForm(request.POST, auto_id=f"id_bind_{credential.name}_%s")
    if form.is_valid():
        try:
            binding = services.bind_credential(
                tenant=tenant, credential_name=credential.name, user=request.user, **form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(
                request, f"{credential.name} may now go with {binding.skill_pattern} to {binding.endpoint}."
            )
            return redirect("reliability:credential_list", tenant_slug=tenant.slug)
    return _credentials_page(request, tenant, bind_forms={credential.name: form}, status=400)


@login_required
@require_POST
def credential_unbind(request: HttpRequest, tenant_slug: str, binding_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    binding = get_object_or_404(CredentialBinding, tenant=tenant, pk=binding_id)
    services.unbind_credential(binding=binding, user=request.user)
    messages.success(
        request, f"{binding.credential_name} no longer goes with {binding.skill_pattern} to {binding.endpoint}."
    )
    return redirect("reliability:credential_list", tenant_slug=tenant.slug)


def _definition_lines(definition: dict | None) -> list[str]:
    return json.dumps(definition or {}, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def _tool_changes(user) -> list[dict]:
    """Imported tools whose server now serves another definition than the one reviewed, with the diff."""
    pins = McpToolPin.objects.filter(server__in=McpServer.objects.visible_to(user)).exclude(pending_sha256="")
    return [
        {
            "pin": pin,
            "diff": list(
                difflib.unified_diff(
                    _definition_lines(pin.definition),
                    _definition_lines(pin.pending_definition),
                    "reviewed",
                    "served now",
                    lineterm="",
                )
            )[2:],
            "can_review": services.can_review_tool_change(pin.server, user),
        }
        for pin in pins.select_related("server__team")
    ]


def _mcp_servers_page(request: HttpRequest, *, form=None, proposal=None, result=None, status: int = 200):
    teams = teams_for(request.user)
    if not (is_platform_admin(request.user) or teams.exists()):
        raise PermissionDenied("Platform admins and members of owning teams manage MCP servers.")
    servers = (
        McpServer.objects.visible_to(request.user)
        .select_related("team", "proposed_by", "reviewed_by")
        .prefetch_related("shared_with")
    )
    team_ids = set(teams.values_list("pk", flat=True))
    maintained_ids = set(request.user.maintained_teams.values_list("pk", flat=True))
    rows = [
        {
            "server": server,
            "can_review": services.can_review_mcp_server(server, request.user, team_ids=team_ids),
            # as services.can_share_mcp_server says, without a query per row
            "can_share": request.user.is_superuser or server.team_id in maintained_ids,
        }
        for server in servers
    ]
    context = {
        "rows": rows,
        "tool_changes": _tool_changes(request.user),
        "team_slugs": Team.objects.values_list("slug", flat=True) if any(r["can_share"] for r in rows) else [],
        "form": form if form is not None else McpServerForm(),
        "proposal": proposal if proposal is not None else McpServerProposalForm(teams=teams),
        "can_register": is_platform_admin(request.user),
        "result": result,
    }
    return render(request, "reliability/mcp_servers.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def mcp_server_list(request: HttpRequest) -> HttpResponse:
    """Servers of one's teams (every server for a platform admin), proposals to review, and the forms."""
    if request.method == "GET":
        return _mcp_servers_page(request)
    if not is_platform_admin(request.user):
        raise PermissionDenied("Platform admins register MCP servers directly; teams propose theirs.")
    form = McpServerForm(request.POST)
    if not form.is_valid():
        return _mcp_servers_page(request, form=form, status=400)
    services.register_mcp_server(**form.cleaned_data)
    messages.success(request, f"Registered {form.cleaned_data['name']}.")
    return redirect("reliability:mcp_server_list")


@login_required
@require_POST
def mcp_server_propose(request: HttpRequest) -> HttpResponse:
    teams = teams_for(request.user)
    if not teams.exists():
        raise PermissionDenied("Only members of an owning team propose MCP servers.")
    proposal = McpServerProposalForm(request.POST, teams=teams)
    if proposal.is_valid():
        try:
            server = services.propose_mcp_server(by=request.user, **proposal.cleaned_data)
        except services.McpServerRefused as exc:
            proposal.add_error("url" if "URL" in str(exc) else "name", str(exc))
        else:
            messages.success(request, f"Proposed {server.name}; another member of {server.team.slug} reviews it.")
            return redirect("reliability:mcp_server_list")
    return _mcp_servers_page(request, proposal=proposal, status=400)


def _get_mcp_server_for_user_or_404(user, server_id: int) -> McpServer:
    return get_object_or_404(McpServer.objects.visible_to(user).select_related("team"), pk=server_id)


@login_required
@require_POST
def mcp_server_review(request: HttpRequest, server_id: int) -> HttpResponse:
    server = _get_mcp_server_for_user_or_404(request.user, server_id)
    decision = request.POST.get("decision")
    if decision not in ("approve", "decline"):
        return HttpResponseBadRequest("Say decision=approve or decision=decline.")
    review = services.approve_mcp_server if decision == "approve" else services.decline_mcp_server
    try:
        review(server=server, by=request.user)
    except services.McpServerRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{server.name} is {server.get_status_display()}.")
    return redirect("reliability:mcp_server_list")


@login_required
@require_POST
def mcp_server_import(request: HttpRequest, server_id: int) -> HttpResponse:
    server = _get_mcp_server_for_user_or_404(request.user, server_id)
    try:
        result = services.import_mcp_tools(server=server, by=request.user)
    except services.McpServerRefused as exc:
        messages.error(request, str(exc))
        return redirect("reliability:mcp_server_list")
    except Exception as exc:  # noqa: BLE001 - any connection failure is shown to the owner, never a 500
        messages.error(request, f"Could not list {server.name}'s tools: {describe_failure(exc, who='the server')}.")
        return redirect("reliability:mcp_server_list")
    return _mcp_servers_page(request, result=result)


def _share_change(request: HttpRequest, server_id: int, change, done: str) -> HttpResponse:
    server = _get_mcp_server_for_user_or_404(request.user, server_id)
    if not services.can_share_mcp_server(server, request.user):  # before the form: a refused user learns nothing
        raise PermissionDenied("Only maintainers of the server's team, or a platform admin, share it.")
    form = McpServerShareForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest(form.errors["team"][0])
    team = form.cleaned_data["team"]
    try:
        change(server=server, team=team, by=request.user)
    except services.McpServerRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done.format(server=server.name, team=team.slug))
    return redirect("reliability:mcp_server_list")


@login_required
@require_POST
def mcp_server_share(request: HttpRequest, server_id: int) -> HttpResponse:
    """A maintainer of the server's team lets another team's skills call it, with the server's headers."""
    return _share_change(
        request, server_id, services.share_mcp_server, "Skills of {team} may now call {server}, with its headers."
    )


@login_required
@require_POST
def mcp_server_unshare(request: HttpRequest, server_id: int) -> HttpResponse:
    return _share_change(
        request, server_id, services.unshare_mcp_server, "Skills of {team} may no longer call {server}."
    )


@login_required
@require_POST
def mcp_tool_change_approve(request: HttpRequest, server_id: int, tool: str) -> HttpResponse:
    server = _get_mcp_server_for_user_or_404(request.user, server_id)
    pin = get_object_or_404(McpToolPin, server=server, tool=tool)
    try:
        services.approve_tool_change(pin=pin, by=request.user)
    except services.McpServerRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Pinned the new definition of {server.name}/{tool}; calls reach it again.")
    return redirect("reliability:mcp_server_list")
