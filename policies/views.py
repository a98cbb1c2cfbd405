"""Console pages: grants for tenant admins; the policy editor with checks, tests, simulation, publish, rollback."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.models import Role
from console.tenancy import RoleRequired, tenant_for_user_or_404, tenants_for
from policies import bundles, engine, services
from policies.forms import (
    GrantForm,
    LocalDecisionsForm,
    PolicyCreateForm,
    PolicyTestForm,
    RevokeGrantForm,
    rules_from_post,
)
from policies.grant_options import reaches_nothing
from policies.models import Grant, Policy, PolicyVersion, Scope, VersionStatus
from registry.models import Skill

SIMULATION_SIZES = (50, 200, 1000)


# Grants -------------------------------------------------------------------------------------------


def _local_form(tenant, data=None) -> LocalDecisionsForm:
    current = bundles.settings_of(tenant)
    initial = {
        "agent_roles": current.agent_roles,
        "bundle_validity_minutes": int(bundles.validity_of(current).total_seconds() // 60),
    }
    ceiling = settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS
    return LocalDecisionsForm(data, initial=initial, tenant=tenant, ceiling_seconds=ceiling)


def _grants_page(
    request: HttpRequest, tenant, form: GrantForm, status: int = 200, local_form: LocalDecisionsForm | None = None
) -> HttpResponse:
    grants = Grant.objects.filter(tenant=tenant).select_related("granted_by", "revoked_by")
    rows = [(grant, reaches_nothing(grant.skill_pattern, grant.agent_role, form.skills)) for grant in grants]
    context = {
        "tenant": tenant,
        "grant_rows": rows,
        "form": form,
        "preview": form.preview(),
        "local_form": local_form or _local_form(tenant),
    }
    return render(request, "policies/grants.html", context, status=status)


@login_required
@require_GET
def grant_list(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    return _grants_page(request, tenant, GrantForm(tenant=tenant))


@login_required
@require_GET
def grant_preview(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """The htmx partial under the grant form: the current skills the chosen role and pattern would cover."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = GrantForm(request.GET, tenant=tenant)
    return render(request, "policies/grants.html#preview", {"tenant": tenant, "preview": form.preview()})


@login_required
@require_POST
def grant_create(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = GrantForm(request.POST, tenant=tenant)
    if not form.is_valid():
        return _grants_page(request, tenant, form, status=400)
    grant = services.create_grant(tenant=tenant, granted_by=request.user, **form.cleaned_data)
    messages.success(request, f"{grant.agent_role} agents may now call {grant.skill_pattern}.")
    return redirect("policies:grant_list", tenant_slug=tenant.slug)


@login_required
@require_POST
def grant_revoke(request: HttpRequest, tenant_slug: str, grant_id: int) -> HttpResponse:
    """Revoke with a reason (asked for on the grant's page, below what the revocation would refuse)."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    grant = get_object_or_404(Grant, pk=grant_id, tenant=tenant)
    form = RevokeGrantForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["reason"]))
        return redirect("grants:grant_detail", tenant_slug=tenant.slug, grant_id=grant.pk)
    services.revoke_grant(grant=grant, revoked_by=request.user, reason=form.cleaned_data["reason"])
    messages.success(request, f"Revoked {grant.skill_pattern} from {grant.agent_role} agents.")
    return redirect("grants:grant_detail", tenant_slug=tenant.slug, grant_id=grant.pk)


@login_required
@require_POST
def local_decisions_save(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """The tenant admin's opt-in: which agent roles decide client-executed calls locally (docs/sdk.md)."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, Role.ADMIN)
    form = _local_form(tenant, request.POST)
    if not form.is_valid():
        return _grants_page(request, tenant, GrantForm(tenant=tenant), status=400, local_form=form)
    services.set_local_decisions(
        tenant=tenant,
        agent_roles=form.cleaned_data["agent_roles"],
        bundle_validity=timedelta(minutes=form.cleaned_data["bundle_validity_minutes"]),
        by_label=request.user.username,
    )
    roles = ", ".join(form.cleaned_data["agent_roles"]) or "no role"
    messages.success(request, f"Local decisions: {roles}. Agents see it in their next decision bundle.")
    return redirect("policies:grant_list", tenant_slug=tenant.slug)


# Policies -----------------------------------------------------------------------------------------


def _get_policy_for_user(user, policy_id: int) -> Policy:
    """Editable: returned. A tenant policy of a tenant the user cannot see: 404. Otherwise 403."""
    policy = get_object_or_404(Policy.objects.select_related("tenant"), pk=policy_id)
    if services.can_edit_policy(user, policy):
        return policy
    if policy.scope == Scope.TENANT and not tenants_for(user).filter(pk=policy.tenant_id).exists():
        raise Http404("No such policy.")
    if policy.scope == Scope.TENANT:
        raise RoleRequired(role=Role.ADMIN, tenant=policy.tenant)
    raise PermissionDenied("Only the tenant's admins or the skill's owners edit this policy.")


@login_required
@require_GET
def policy_list(request: HttpRequest) -> HttpResponse:
    policies = Policy.objects.editable_by(request.user).select_related("tenant").prefetch_related("versions")
    rows = [
        {
            "policy": p,
            "published": next((v for v in p.versions.all() if v.status == VersionStatus.PUBLISHED), None),
            "shadow": next((v for v in p.versions.all() if v.status == VersionStatus.SHADOW), None),
        }
        for p in policies
    ]
    return render(
        request,
        "policies/list.html",
        {"rows": rows, "form": PolicyCreateForm(), "admin_tenants": tenants_for(request.user, Role.ADMIN)},
    )


@login_required
@require_POST
def policy_create(request: HttpRequest) -> HttpResponse:
    form = PolicyCreateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the policy a name and a scope.")
        return redirect("policies:policy_list")
    data = form.cleaned_data
    tenant = None
    if data["scope"] == Scope.PLATFORM and not request.user.is_superuser:
        raise PermissionDenied("Only platform admins write platform policies.")
    if data["scope"] == Scope.TENANT:
        tenant = tenant_for_user_or_404(request.user, data["tenant"], Role.ADMIN)
    if data["scope"] == Scope.SKILL:
        skill = Skill.objects.filter(name=data["skill_name"]).first()
        if skill is None or not skill.is_owned_by(request.user):
            raise PermissionDenied("Only the skill's owning team writes its policy.")
    policy = services.create_policy(
        name=data["name"], scope=data["scope"], tenant=tenant, skill_name=data["skill_name"], created_by=request.user
    )
    return redirect("policies:policy_detail", policy_id=policy.pk)


def _detail_context(
    policy: Policy,
    *,
    user,
    draft: PolicyVersion | None = None,
    rules: list[dict] | None = None,
    problems: dict | None = None,
) -> dict:
    draft = draft or services.draft_of(policy)
    published = policy.versions.filter(status=VersionStatus.PUBLISHED).first()
    rules = rules if rules is not None else (draft.rules if draft else (published.rules if published else []))
    rows = [{**rule, "errors": (problems or {}).get(index, [])} for index, rule in enumerate(rules)]
    rows += [{"id": "", "verdict": "allow", "condition": "", "reason": "", "override_taint": False, "errors": []}] * 2
    tests = services.run_policy_tests(version=draft) if draft else []
    return {
        "policy": policy,
        "draft": draft,
        "rows": rows,
        "published": published,
        "versions": policy.versions.select_related("published_by", "created_by"),
        "test_outcomes": tests,
        "test_form": PolicyTestForm(),
        "verdicts": engine.VERDICTS,
        "shadow_rows": services.shadow_differences(policy=policy, user=user, limit=50),
        "simulation_sizes": SIMULATION_SIZES,
        "context_variables": engine.CONTEXT_VARIABLES,
        # Only platform rules may lower the taint floor; elsewhere the box shows only on a rule that has one,
        # so that its author can untick what saving refused.
        "override_column": policy.scope == engine.OVERRIDE_TAINT_SCOPE or any(r.get("override_taint") for r in rows),
    }


@login_required
@require_GET
def policy_detail(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    return render(request, "policies/detail.html", _detail_context(policy, user=request.user))


@login_required
@require_POST
def draft_save(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    rules = rules_from_post(request.POST)
    try:
        services.save_draft(policy=policy, rules=rules, user=request.user)
    except services.RulesInvalid as exc:
        context = _detail_context(policy, user=request.user, rules=rules, problems=exc.problems)
        return render(request, "policies/detail.html", context, status=400)
    messages.success(request, "Draft saved.")
    return redirect("policies:policy_detail", policy_id=policy.pk)


@login_required
@require_POST
def condition_check(request: HttpRequest) -> HttpResponse:
    """htmx: inline syntax and type errors of one condition while it is typed."""
    errors = engine.check_condition(_condition_being_typed(request))
    return render(request, "policies/detail.html#condition-errors", {"errors": errors})


def _condition_being_typed(request: HttpRequest) -> str:
    """htmx posts the whole editor form; the triggering textarea's id (cond-<row>) says which row to check."""
    conditions = request.POST.getlist("condition")
    trigger = request.headers.get("HX-Trigger", "")
    if trigger.startswith("cond-") and trigger[5:].isdigit() and int(trigger[5:]) < len(conditions):
        return conditions[int(trigger[5:])]
    return conditions[0] if conditions else ""


@login_required
@require_POST
def simulate(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    draft = services.draft_of(policy)
    if draft is None:
        return HttpResponse('<p class="muted">Save a draft first.</p>')
    try:
        limit = min(int(request.POST.get("limit", 200)), max(SIMULATION_SIZES))
    except ValueError:
        limit = 200
    simulation = services.simulate_policy(version=draft, user=request.user, limit=limit)
    return render(
        request, "policies/detail.html#simulation", {"simulation": simulation, "draft": draft, "limit": limit}
    )


@login_required
@require_POST
def publish(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    draft = services.draft_of(policy)
    if draft is None:
        messages.error(request, "There is no draft to publish.")
        return redirect("policies:policy_detail", policy_id=policy.pk)
    shadow = request.POST.get("mode") == "shadow"
    try:
        services.publish_policy_version(version=draft, user=request.user, shadow=shadow)
    except services.PolicyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"v{draft.number} {'runs in shadow mode' if shadow else 'is now enforced'}.")
    return redirect("policies:policy_detail", policy_id=policy.pk)


@login_required
@require_POST
def test_add(request: HttpRequest, policy_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    form = PolicyTestForm(request.POST)
    if form.is_valid():
        services.add_policy_test(policy=policy, user=request.user, **form.cleaned_data)
        messages.success(request, f"Test '{form.cleaned_data['name']}' added.")
    else:
        messages.error(
            request,
            "The test is not valid: "
            + "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()),
        )
    return redirect("policies:policy_detail", policy_id=policy.pk)


@login_required
@require_POST
def rollback(request: HttpRequest, policy_id: int, version_id: int) -> HttpResponse:
    policy = _get_policy_for_user(request.user, policy_id)
    version = get_object_or_404(PolicyVersion, pk=version_id, policy=policy)
    try:
        new = services.rollback_policy(version=version, user=request.user)
    except services.PolicyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Published v{new.number} with the rules of v{version.number}.")
    return redirect("policies:policy_detail", policy_id=policy.pk)
