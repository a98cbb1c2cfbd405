from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import health, services
from console.forms import (
    AgentForm,
    InvitationForm,
    MemberRolesForm,
    RotateKeyForm,
    SuspendAgentForm,
    TeamForm,
    TeammateForm,
    TenantForm,
    TokenForm,
)
from console.models import (
    INVITATION_TTL,
    Agent,
    Invitation,
    InvitationEvent,
    Membership,
    MembershipEvent,
    Role,
    Team,
    Tenant,
    hash_key,
)
from console.tenancy import SESSION_TENANT_KEY, is_platform_admin, teams_for, tenant_for_user_or_404
from lib import clock


class AirlockLoginView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        # `make run` prints the demo logins; repeat the first one on the page, in development only.
        return super().get_context_data(debug_demo_hint=settings.DEBUG, **kwargs)


def login_locked(request: HttpRequest, *args) -> HttpResponse:
    """What django-axes answers instead of the login view while the account or address is locked out
    (AXES_LOCKOUT_CALLABLE): the login page, saying so, with 429 and Retry-After."""
    minutes = settings.AIRLOCK_LOGIN_LOCKOUT_MINUTES
    context = {
        "form": AuthenticationForm(request),
        "locked_minutes": minutes,
        "debug_demo_hint": settings.DEBUG,
        "next": request.POST.get("next", ""),
    }
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("console:login")


@login_required
@require_POST
def switch_tenant(request: HttpRequest) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, request.POST.get("tenant", ""))
    request.session[SESSION_TENANT_KEY] = tenant.slug
    next_url = request.POST.get("next") or reverse("console:home")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = reverse("console:home")
    return redirect(next_url)


@login_required
@require_GET
def member_list(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    return _members_page(request, tenant, InvitationForm())


def _members_page(request: HttpRequest, tenant: Tenant, form: InvitationForm, status: int = 200) -> HttpResponse:
    return render(
        request,
        "console/members.html",
        {
            "tenant": tenant,
            "rows": _member_rows(tenant),
            "form": form,
            "invitations": Invitation.objects.pending().filter(tenant=tenant).select_related("invited_by"),
            "events": InvitationEvent.objects.filter(tenant=tenant).select_related("invitation")[:20],
            "access_events": MembershipEvent.objects.filter(tenant=tenant)[:20],
            "ttl_days": INVITATION_TTL.days,
        },
        status=status,
    )


def _member_rows(tenant) -> list[dict]:
    rows: dict[int, dict] = {}
    for membership in Membership.objects.filter(tenant=tenant).select_related("user"):
        row = rows.setdefault(membership.user_id, {"user": membership.user, "roles": []})
        row["roles"].append(membership.role)
    return list(rows.values())


@login_required
@require_POST
def invitation_create(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = InvitationForm(request.POST)
    if not form.is_valid():
        return _members_page(request, tenant, form, status=400)
    invitation = services.invite_member(
        tenant=tenant,
        address=form.cleaned_data["address"],
        roles=set(form.cleaned_data["roles"]),
        invited_by=request.user,
    )
    # The same words whether or not an account matches: this page must not tell who has one.
    messages.success(
        request,
        f"Invitation for {invitation.address} recorded. If it names an account, its owner "
        "sees it on their home page (an e-mail address also gets a link); they become a "
        "member when they accept.",
    )
    return redirect("console:member_list", tenant_slug=tenant.slug)


@login_required
@require_POST
def invitation_revoke(request: HttpRequest, tenant_slug: str, invitation_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    invitation = get_object_or_404(Invitation, pk=invitation_id, tenant=tenant)
    try:
        services.revoke_invitation(invitation=invitation, user=request.user)
    except services.InvitationClosed as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Invitation for {invitation.address} revoked.")
    return redirect("console:member_list", tenant_slug=tenant.slug)


def _invitations_for(user):
    return Invitation.objects.pending().addressed_to(user).select_related("tenant", "invited_by")


def _get_invitation_for_user_or_404(user, **lookup) -> Invitation:
    """An invitation addressed to this user (pending or not); anyone else's is a 404."""
    return get_object_or_404(Invitation.objects.addressed_to(user).select_related("tenant", "invited_by"), **lookup)


@login_required
@require_GET
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    """The e-mailed link: the invitation, with accept and decline, for the account it names."""
    invitation = _get_invitation_for_user_or_404(request.user, token_hash=hash_key(token))
    return render(request, "console/invitation.html", {"invitation": invitation})


@login_required
@require_POST
def invitation_accept(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = _get_invitation_for_user_or_404(request.user, pk=invitation_id)
    try:
        services.accept_invitation(invitation=invitation, user=request.user)
    except services.InvitationClosed as exc:
        messages.error(request, str(exc))
        return redirect("console:home")
    request.session[SESSION_TENANT_KEY] = invitation.tenant.slug
    messages.success(request, f"You joined {invitation.tenant.name} as {', '.join(invitation.roles)}.")
    return redirect("console:home")


@login_required
@require_POST
def invitation_decline(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = _get_invitation_for_user_or_404(request.user, pk=invitation_id)
    try:
        services.decline_invitation(invitation=invitation, user=request.user)
    except services.InvitationClosed as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"You declined the invitation to {invitation.tenant.name}.")
    return redirect("console:home")


def _get_member_or_404(tenant: Tenant, user_id: int):
    members = get_user_model().objects.filter(pk__in=Membership.objects.filter(tenant=tenant).values("user_id"))
    return get_object_or_404(members, pk=user_id)


@login_required
@require_http_methods(["GET", "POST"])
def member_edit(request: HttpRequest, tenant_slug: str, user_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    user = _get_member_or_404(tenant, user_id)
    current = set(Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True))
    form = MemberRolesForm(request.POST if request.method == "POST" else None, initial={"roles": sorted(current)})
    if request.method == "POST" and form.is_valid():
        roles = set(form.cleaned_data["roles"])
        if user == request.user and Role.ADMIN in current and Role.ADMIN not in roles:
            messages.error(request, "You cannot remove your own admin role; ask another admin.")
        else:
            try:
                services.set_member_roles(tenant=tenant, user=user, roles=roles, by=request.user)
            except services.MembershipRefused as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Roles of {user.username} updated.")
                return redirect("console:member_list", tenant_slug=tenant.slug)
    status = 400 if form.errors else 200
    return render(request, "console/member_edit.html", {"tenant": tenant, "member": user, "form": form}, status=status)


@login_required
@require_POST
def member_remove(request: HttpRequest, tenant_slug: str, user_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    user = _get_member_or_404(tenant, user_id)
    if user == request.user:
        messages.error(request, "You cannot remove yourself; ask another admin.")
        return redirect("console:member_list", tenant_slug=tenant.slug)
    try:
        services.remove_member(tenant=tenant, user=user, by=request.user)
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{user.username} is no longer a member of {tenant.name}.")
    return redirect("console:member_list", tenant_slug=tenant.slug)


@login_required
@require_GET
def agent_list(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    return render(
        request,
        "console/agents.html",
        {
            "tenant": tenant,
            "agents": tenant.agents.all(),
            "form": AgentForm(tenant=tenant),
            "now": clock.now(),
        },
    )


@never_cache
@login_required
@require_POST
def agent_create(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = AgentForm(request.POST, tenant=tenant)
    if not form.is_valid():
        return render(
            request,
            "console/agents.html",
            {
                "tenant": tenant,
                "agents": tenant.agents.all(),
                "form": form,
                "now": clock.now(),
            },
            status=400,
        )
    agent, key = services.create_agent(tenant=tenant, created_by=request.user, **form.cleaned_data)
    return render(request, "console/agent_key.html", {"tenant": tenant, "agent": agent, "key": key})


def _agent_keys_page(request: HttpRequest, tenant: Tenant, agent: Agent, form: RotateKeyForm, status: int = 200):
    context = {
        "tenant": tenant,
        "agent": agent,
        "form": form,
        "previous_live": agent.previous_key_live(clock.now()),
        "events": agent.key_events.all()[:20],
        "suspend_form": SuspendAgentForm(),
        "suspended": agent.is_suspended(clock.now()),
    }
    return render(request, "console/agent_keys.html", context, status=status)


@login_required
@require_GET
def agent_keys(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    return _agent_keys_page(request, tenant, agent, RotateKeyForm())


@never_cache
@login_required
@require_POST
def agent_rotate(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    form = RotateKeyForm(request.POST)
    if not form.is_valid():
        return _agent_keys_page(request, tenant, agent, form, status=400)
    try:
        agent, key = services.rotate_agent_key(agent=agent, by=request.user, grace=form.grace)
    except services.KeyRotationRefused as exc:
        form.add_error(None, str(exc))
        return _agent_keys_page(request, tenant, agent, form, status=400)
    return render(request, "console/agent_key.html", {"tenant": tenant, "agent": agent, "key": key, "rotated": True})


@login_required
@require_POST
def agent_cut_off(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    try:
        services.cut_off_old_key(agent=agent, by=request.user)
        messages.success(request, f"The old key of {agent.name} is cut off; only its current key works.")
    except services.KeyRotationRefused as exc:
        messages.error(request, str(exc))
    return redirect("console:agent_keys", tenant_slug=tenant.slug, agent_id=agent.pk)


@login_required
@require_POST
def agent_revoke(request: HttpRequest, tenant_slug: str, agent_id: int) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    agent = get_object_or_404(tenant.agents, pk=agent_id)
    services.revoke_agent(agent=agent)
    messages.success(request, f"Agent {agent.name} revoked; its key no longer works.")
    return redirect("console:agent_list", tenant_slug=tenant.slug)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        token, key = services.create_personal_token(
            user=request.user,
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
            expires_in=timedelta(days=form.cleaned_data["expires_in_days"]),
        )
        return render(request, "console/token_key.html", {"token": token, "key": key})
    return render(request, "console/tokens.html", {"tokens": request.user.access_tokens.all(), "form": form})


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(request.user.access_tokens, pk=token_id)
    services.revoke_personal_token(token=token)
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("console:token_list")


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """Normally answered by console.health.HealthCheckMiddleware; kept so reverse("healthz") works."""
    return health.health_response()


# --- tenants (platform admins) and teams -----------------------------------------------------------
def _require_platform_admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("Only platform admins create and list every tenant.")


@login_required
@require_http_methods(["GET", "POST"])
def tenant_list(request: HttpRequest) -> HttpResponse:
    _require_platform_admin(request)
    form = TenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            tenant, invitation = services.create_tenant(by=request.user, **form.cleaned_data)
        except services.SlugTaken as exc:
            form.add_error("slug", str(exc))
        else:
            messages.success(request, f"Created {tenant.name}; {invitation.address} is invited as its first admin.")
            return redirect("console:member_list", tenant_slug=tenant.slug)
    tenants = Tenant.objects.annotate(member_count=Count("memberships__user", distinct=True))
    context = {"tenants": tenants, "form": form}
    return render(request, "console/tenants.html", context, status=400 if form.errors else 200)


def _get_team_for_user_or_404(user, team_slug: str) -> Team:
    """A team the user belongs to (any team for a platform admin); every other team is a 404."""
    return get_object_or_404(teams_for(user), slug=team_slug)


@login_required
@require_http_methods(["GET", "POST"])
def team_list(request: HttpRequest) -> HttpResponse:
    form = TeamForm(request.POST or None)
    if request.method == "POST":
        _require_platform_admin(request)
        if form.is_valid():
            try:
                team = services.create_team(by=request.user, **form.cleaned_data)
            except services.SlugTaken as exc:
                form.add_error("slug", str(exc))
            else:
                messages.success(request, f"Created the team {team.slug}.")
                return redirect("console:team_detail", team_slug=team.slug)
    teams = teams_for(request.user).annotate(member_count=Count("members", distinct=True))
    context = {"teams": teams, "form": form, "can_create": is_platform_admin(request.user)}
    return render(request, "console/teams.html", context, status=400 if form.errors else 200)


def _team_page(request: HttpRequest, team: Team, form: TeammateForm, status: int = 200) -> HttpResponse:
    maintainers = set(team.maintainers.values_list("pk", flat=True))
    context = {
        "team": team,
        "members": [{"user": user, "maintainer": user.pk in maintainers} for user in team.members.order_by("username")],
        "can_maintain": team.is_maintained_by(request.user),
        "form": form,
        "events": MembershipEvent.objects.filter(team=team)[:20],
    }
    return render(request, "console/team.html", context, status=status)


@login_required
@require_GET
def team_detail(request: HttpRequest, team_slug: str) -> HttpResponse:
    return _team_page(request, _get_team_for_user_or_404(request.user, team_slug), TeammateForm())


@login_required
@require_POST
def team_member_add(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = _get_team_for_user_or_404(request.user, team_slug)
    if not team.is_maintained_by(request.user):
        raise PermissionDenied(f"Only the maintainers of {team.slug} add teammates.")
    form = TeammateForm(request.POST)
    if not form.is_valid():
        return _team_page(request, team, form, status=400)
    services.add_teammate(team=team, user=form.cleaned_data["username"], by=request.user)
    messages.success(request, f"{form.cleaned_data['username'].username} is now in {team.slug}.")
    return redirect("console:team_detail", team_slug=team.slug)


def _get_teammate_or_404(team: Team, user_id: int):
    return get_object_or_404(team.members.all(), pk=user_id)


@login_required
@require_POST
def team_member_remove(request: HttpRequest, team_slug: str, user_id: int) -> HttpResponse:
    team = _get_team_for_user_or_404(request.user, team_slug)
    user = _get_teammate_or_404(team, user_id)
    try:
        services.remove_teammate(team=team, user=user, by=request.user)
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{user.username} is no longer in {team.slug}.")
    return redirect("console:team_detail", team_slug=team.slug)


@login_required
@require_POST
def team_maintainer(request: HttpRequest, team_slug: str, user_id: int) -> HttpResponse:
    team = _get_team_for_user_or_404(request.user, team_slug)
    user = _get_teammate_or_404(team, user_id)
    make = request.POST.get("maintainer") == "1"
    try:
        services.set_maintainer(team=team, user=user, maintainer=make, by=request.user)
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    else:
        verb = "is now a maintainer of" if make else "no longer maintains"
        messages.success(request, f"{user.username} {verb} {team.slug}.")
    return redirect("console:team_detail", team_slug=team.slug)
