"""The owners' console: catalog, skill page, edit with live validation, lifecycle actions, MCP import."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Max, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.models import Tenant
from console.tenancy import teams_for
from lib.egress import describe_failure
from registry import namespaces, review, services
from registry.contracts import declared_functions
from registry.demo import CATALOG
from registry.diff import diff_manifests
from registry.forms import CatalogFilterForm, DeprecateForm, ImportMcpForm, ManifestForm, NamespaceClaimForm
from registry.mcp_import import import_mcp_server
from registry.models import (
    DiscoveryEvaluation,
    DiscoveryQuery,
    NamespaceClaim,
    Skill,
    SkillVersion,
    VersionStatus,
)
from registry.ranking import skill_texts, terms
from registry.rollout_views import rollout_context, staged_by_skill
from registry.validation import lint_manifest


def _get_skill(name: str) -> Skill:
    return get_object_or_404(Skill.objects.select_related("owner_team"), name=name)


def _get_version(skill: Skill, version: str) -> SkillVersion:
    return get_object_or_404(skill.versions.select_related("replacement", "author", "reviewer"), version=version)


def head_version(versions: list[SkillVersion]) -> SkillVersion | None:
    """The version to show for a skill: its newest active one, else its newest of any status."""
    ordered = sorted(versions, key=lambda v: v.semver, reverse=True)
    return next((v for v in ordered if v.status == VersionStatus.ACTIVE), ordered[0] if ordered else None)


def _filtered_skills(form: CatalogFilterForm):
    skills = Skill.objects.select_related("owner_team").prefetch_related("versions").order_by("name")
    if not form.is_valid():
        return skills
    data = form.cleaned_data
    if data["q"]:
        skills = skills.filter(Q(name__icontains=data["q"]) | Q(versions__description__icontains=data["q"]))
    if data["namespace"]:
        skills = skills.filter(namespace=data["namespace"])
    if data["owner"]:
        skills = skills.filter(owner_team=data["owner"])
    version_filter = {
        key: data[field]
        for field, key in (
            ("effect", "versions__effect"),
            ("status", "versions__status"),
            ("data_class", "versions__data_classification"),
        )
        if data[field]
    }
    return skills.filter(**version_filter).distinct() if version_filter or data["q"] else skills


def discovery_misses(user, namespace: str | None = None, limit: int = 10) -> dict:
    """The searches that found nothing or little, per tenant the user belongs to (the agents' words are
    their tenant's data); for skill owners also how many misses other tenants had, a count without text."""
    misses = DiscoveryQuery.objects.all()
    if namespace is not None:
        misses = misses.filter(Q(namespace=namespace) | Q(namespace=""))
    visible = misses.visible_to(user)
    tenant_ids = {pk for pk in visible.values_list("agent__tenant", flat=True).distinct() if pk is not None}
    groups = [
        {
            "tenant": tenant,
            "rows": list(
                visible.filter(agent__tenant=tenant)
                .values("query", "namespace")
                .annotate(times=Count("id"), results=Max("result_count"), last_seen=Max("created_at"))
                .order_by("-times", "-last_seen")[:limit]
            ),
        }
        for tenant in Tenant.objects.filter(pk__in=tenant_ids).order_by("name")
    ]
    elsewhere = misses.hidden_from(user).count() if teams_for(user).exists() else 0
    return {"tenants": groups, "elsewhere": elsewhere}


def discovery_figures(namespace: str | None = None) -> list[DiscoveryEvaluation]:
    """The latest evaluation figures (manage.py evaluate_discovery), of one namespace or all."""
    rows = DiscoveryEvaluation.objects.all()
    return list(rows.filter(namespace=namespace) if namespace is not None else rows)


def candidate_examples(misses: dict, skill: Skill, manifest: dict, limit: int = 5) -> list[str]:
    """The missed searches the reader may see that share a word with this skill, as lines an owner can
    paste into a manifest's `examples` ("water the plants" is no candidate for a refund skill)."""
    entry = {"name": skill.name, "namespace": skill.namespace, "manifest": manifest}
    words = {word for text in skill_texts(entry).values() for word in terms(text)}
    queries = [row["query"] for group in misses["tenants"] for row in group["rows"]]
    return list(dict.fromkeys(q for q in queries if len(q.strip()) >= 5 and words & set(terms(q))))[:limit]


@login_required
@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    form = CatalogFilterForm(request.GET or None)
    page = Paginator(_filtered_skills(form), 50).get_page(request.GET.get("page"))
    staged = staged_by_skill(
        [skill.pk for skill in page],
        owned_team_ids=set(request.user.teams.values_list("pk", flat=True)),
        is_admin=request.user.is_superuser,
    )
    rows = [
        {"skill": skill, "head": head_version(list(skill.versions.all())), "staged": staged.get(skill.pk)}
        for skill in page
    ]
    return render(
        request,
        "registry/catalog.html",
        {
            "form": form,
            "rows": rows,
            "page": page,
            "misses": discovery_misses(request.user),
            "figures": discovery_figures(),
            "can_create": teams_for(request.user).exists(),
        },
    )


def schema_fields(schema: dict, prefix: str = "") -> list[dict]:
    """Flatten an object schema's properties into readable rows (nested objects and array items included)."""
    rows = []
    required = set(schema.get("required") or [])
    for name, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        types = sub.get("type", "any")
        constraints = [
            f"{key} {json.dumps(sub[key]) if key == 'default' else sub[key]}"
            for key in ("minLength", "maxLength", "minimum", "maximum", "pattern", "format", "default")
            if key in sub
        ]
        if "enum" in sub:
            constraints.insert(0, "one of " + ", ".join(map(str, sub["enum"])))
        rows.append(
            {
                "name": prefix + name,
                "type": "/".join(types) if isinstance(types, list) else types,
                "required": name in required,
                "constraints": "; ".join(constraints),
                "description": sub.get("description", ""),
            }
        )
        if isinstance(sub.get("items"), dict) and sub["items"].get("properties"):
            rows += schema_fields(sub["items"], f"{prefix}{name}[].")
        elif sub.get("properties"):
            rows += schema_fields(sub, f"{prefix}{name}.")
    return rows


@login_required
@require_GET
def skill_detail(request: HttpRequest, name: str) -> HttpResponse:
    skill = _get_skill(name)
    versions = list(skill.versions.select_related("author", "reviewer", "replacement"))
    head = head_version(versions)
    is_owner = skill.is_owned_by(request.user)
    misses = discovery_misses(request.user, skill.namespace, 8)
    candidates = candidate_examples(misses, skill, head.manifest) if is_owner and head else []
    return render(
        request,
        "registry/skill.html",
        {
            "skill": skill,
            "versions": versions,
            "head": head,
            "manifest": head.effective_manifest() if head else {},
            "is_owner": is_owner,
            "deprecate_form": DeprecateForm(skill=skill),
            "misses": misses,
            "figures": discovery_figures(skill.namespace),
            "candidate_examples": json.dumps({"examples": candidates}, indent=2) if candidates else "",
            "warnings": lint_manifest(head.manifest) if head else [],
            "reviewable": [v for v in versions if services.can_review(v, request.user)],
            "input_fields": schema_fields(head.manifest.get("input_schema", {})) if head else [],
            "output_fields": schema_fields(head.manifest.get("output_schema", {})) if head else [],
            **rollout_context(skill, versions, is_owner=is_owner),
        },
    )


@login_required
@require_GET
def skill_diff(request: HttpRequest, name: str) -> HttpResponse:
    skill = _get_skill(name)
    old = _get_version(skill, request.GET.get("from", ""))
    new = _get_version(skill, request.GET.get("to", ""))
    changes = diff_manifests(old.manifest, new.manifest)
    return render(
        request,
        "registry/diff.html",
        {"skill": skill, "old": old, "new": new, "changes": changes, "versions": skill.versions.all()},
    )


@login_required
@require_GET
def version_review(request: HttpRequest, name: str, version: str) -> HttpResponse:
    """What a second person approves: the field-level diff of execution, risk and permissions, and its reach.

    Owners only (403 otherwise): the reach names the tenants whose grants cover the skill.
    """
    skill = _get_skill(name)
    if not skill.is_owned_by(request.user):
        raise PermissionDenied(f"Only the {skill.owner_team.slug} team or a platform admin reviews {skill.name}.")
    found = _get_version(skill, version)
    base = services.review_base(found)
    previous = base.manifest if base else None
    return render(
        request,
        "registry/review.html",
        {
            "skill": skill,
            "version": found,
            "base": base,
            "reasons": found.review_reasons if found.review_reasons else review.reasons(previous, found.manifest),
            "changes": review.field_changes(previous, found.manifest),
            "reach": review.reach_of(found.manifest),
            "credential": (found.manifest.get("execution") or {}).get("credential") or "",
            "can_approve": services.can_review(found, request.user),
            "is_author": request.user.pk == found.author_id,
        },
    )


def _next_version(version: str) -> str:
    major, minor, patch = (int(part) for part in version.split("."))
    return f"{major}.{minor}.{patch + 1}"


def _editor(request: HttpRequest, skill: Skill | None, initial: dict) -> HttpResponse:
    if request.method == "POST":
        form = ManifestForm(request.POST)
        if form.is_valid():
            try:
                version = services.create_draft_version(
                    manifest=form.cleaned_data["manifest"], author=request.user, skill=skill
                )
            except services.ManifestInvalid as exc:
                return render(
                    request,
                    "registry/edit.html",
                    {
                        "form": form,
                        "skill": skill,
                        "errors": exc.errors,
                        "warnings": lint_manifest(form.cleaned_data["manifest"]),
                    },
                    status=400,
                )
            messages.success(request, f"Saved draft {version}. Publish it from the skill page.")
            return redirect("registry:skill", name=version.skill.name)
        return render(request, "registry/edit.html", {"form": form, "skill": skill}, status=400)
    form = ManifestForm(initial={"manifest": json.dumps(initial, indent=2)})
    return render(request, "registry/edit.html", {"form": form, "skill": skill})


@login_required
def skill_new(request: HttpRequest) -> HttpResponse:
    if not teams_for(request.user).exists():
        raise PermissionDenied("Only members of an owning team may create skills.")
    template = {**CATALOG[0], "skill_id": "skl_", "name": "namespace.verb_object", "version": "1.0.0"}
    return _editor(request, None, template)


@login_required
def version_new(request: HttpRequest, name: str) -> HttpResponse:
    skill = _get_skill(name)
    if not skill.is_owned_by(request.user):
        raise PermissionDenied(f"Only the {skill.owner_team.slug} team may add versions.")
    head = head_version(list(skill.versions.all()))
    initial = dict(head.manifest) if head else {}
    if head:
        initial["version"] = _next_version(head.version)
    return _editor(request, skill, initial)


@login_required
@require_POST
def validate_manifest_view(request: HttpRequest) -> HttpResponse:
    """htmx: the inline errors and warnings of the manifest being typed."""
    form = ManifestForm(request.POST)
    skill = Skill.objects.filter(name=request.POST.get("skill", "")).first()
    context: dict = {"errors": [], "warnings": []}
    if not form.is_valid():
        context["errors"] = [{"path": "$", "code": "json", "message": e} for e in form.errors.get("manifest", [])]
    else:
        manifest = form.cleaned_data["manifest"]
        context["errors"] = services.check_manifest(manifest=manifest, skill=skill or None)
        context["warnings"] = lint_manifest(manifest)
    context["checked"] = True
    return render(request, "registry/edit.html#validation", context)


def _lifecycle(request: HttpRequest, skill: Skill, action) -> HttpResponse:
    try:
        message = action()
    except services.ManifestInvalid as exc:
        for error in exc.errors:
            messages.error(request, f"{error['path']}: {error['message']}")
    else:
        messages.success(request, message)
    return redirect("registry:skill", name=skill.name)


@login_required
@require_POST
def version_publish(request: HttpRequest, name: str, version: str) -> HttpResponse:
    skill = _get_skill(name)
    found = _get_version(skill, version)

    def act() -> str:
        published = services.publish_version(version=found, user=request.user)
        if published.status == VersionStatus.IN_REVIEW:
            return f"{published} needs a second person's review: {'; '.join(published.review_reasons)}."
        return f"Published {published}; a new snapshot is live."

    return _lifecycle(request, skill, act)


@login_required
@require_POST
def version_approve(request: HttpRequest, name: str, version: str) -> HttpResponse:
    skill = _get_skill(name)
    found = _get_version(skill, version)

    def act() -> str:
        return f"Approved and published {services.approve_version(version=found, user=request.user)}."

    return _lifecycle(request, skill, act)


@login_required
@require_POST
def version_confirm(request: HttpRequest, name: str, version: str) -> HttpResponse:
    skill = _get_skill(name)
    found = _get_version(skill, version)

    def act() -> str:
        confirmed = services.confirm_imported_defaults(version=found, user=request.user)
        return f"Confirmed the imported defaults of {confirmed}; review them before publishing."

    return _lifecycle(request, skill, act)


@login_required
@require_POST
def skill_deprecate(request: HttpRequest, name: str) -> HttpResponse:
    skill = _get_skill(name)
    if not skill.is_owned_by(request.user):
        raise PermissionDenied(f"Only the {skill.owner_team.slug} team may deprecate {skill.name}.")
    form = DeprecateForm(request.POST, skill=skill)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{field}: {' '.join(errs)}" for field, errs in form.errors.items()))
        return redirect("registry:skill", name=skill.name)

    def act() -> str:
        services.deprecate_skill(
            skill=skill,
            user=request.user,
            replacement=form.cleaned_data["replacement"],
            sunset_at=form.cleaned_data["sunset_at"],
        )
        return f"Deprecated {skill}; it is hidden from discovery and callable by exact version until sunset."

    return _lifecycle(request, skill, act)


@login_required
@require_POST
def skill_retire(request: HttpRequest, name: str) -> HttpResponse:
    skill = _get_skill(name)

    def act() -> str:
        services.retire_skill(skill=skill, user=request.user)
        return f"Retired {skill}; runtimes no longer know it."

    return _lifecycle(request, skill, act)


@login_required
def import_mcp(request: HttpRequest) -> HttpResponse:
    """A platform admin imports from any URL; a team imports from its approved servers (the MCP servers page),
    since only a server another person approved is called or imported from."""
    if not request.user.is_superuser:
        raise PermissionDenied("Teams import from their approved servers on the MCP servers page.")
    teams = teams_for(request.user)
    form = ImportMcpForm(request.POST or None, teams=teams)
    result = None
    if request.method == "POST" and form.is_valid():
        try:
            result = import_mcp_server(
                target=form.cleaned_data["target"],
                team=form.cleaned_data["team"],
                author=request.user,
                server_name=form.cleaned_data["server_name"],
            )
        except Exception as exc:  # noqa: BLE001 - any connection failure is shown to the owner as a form error
            # the guard's rule or the kind of failure, never the server's own words
            form.add_error("target", f"Could not list the server's tools: {describe_failure(exc, who='the server')}.")
    return render(
        request,
        "registry/import.html",
        {"form": form, "result": result},
        status=400 if request.method == "POST" and form.errors else 200,
    )


@login_required
def namespace_list(request: HttpRequest) -> HttpResponse:
    """Who owns which namespace, the claims waiting for a platform admin, and the in-process functions with
    what each declares; members of an owning team ask for a namespace here."""
    teams = namespaces.claimable_teams(request.user)
    form = NamespaceClaimForm(request.POST or None, teams=teams)
    if request.method == "POST":
        namespaces.require_claimant(request.user)
        if form.is_valid():
            try:
                claim = namespaces.request_namespace(
                    namespace=form.cleaned_data["namespace"], team=form.cleaned_data["team"], user=request.user
                )
            except namespaces.ClaimRefused as exc:
                form.add_error("namespace", str(exc))
            else:
                verb = "now belongs to" if claim.status == "approved" else "is requested for"
                messages.success(request, f"The namespace {claim.namespace} {verb} {claim.team.slug}.")
                return redirect("registry:namespaces")
    skills_by_namespace = dict(Skill.objects.values_list("namespace").annotate(n=Count("id")).order_by())
    rows = [
        {
            "claim": claim,
            "skills": sum(n for name, n in skills_by_namespace.items() if namespaces.covers(claim.namespace, name)),
        }
        for claim in NamespaceClaim.objects.select_related("team", "requested_by", "decided_by")
    ]
    context = {"rows": rows, "form": form, "can_claim": teams.exists(), "functions": declared_functions()}
    return render(request, "registry/namespaces.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def namespace_decide(request: HttpRequest, namespace: str) -> HttpResponse:
    claim = get_object_or_404(NamespaceClaim.objects.select_related("team"), namespace=namespace)
    try:
        if request.POST.get("decision") == "approve":
            namespaces.approve_claim(claim=claim, user=request.user)
            messages.success(request, f"The namespace {claim.namespace} now belongs to {claim.team.slug}.")
        else:
            namespaces.decline_claim(claim=claim, user=request.user)
            messages.success(request, f"Declined {claim.team.slug}'s claim on {claim.namespace}.")
    except namespaces.ClaimRefused as exc:
        messages.error(request, str(exc))
    return redirect("registry:namespaces")
