"""The rollout view of the owners' console: who is on which version of a skill, each version's figures from
the traces, the audit, and the owners' roll out / promote / rollback buttons (POST, CSRF, confirmation).

Canary tenants are named only to the owning team and platform admins; everyone else sees that a version is
staged and how far, never which other tenants are on it.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from registry import hooks, rollouts
from registry.forms import RolloutForm
from registry.models import Rollout, RolloutState, Skill, SkillVersion, VersionStatus

FIGURES_WINDOW = timedelta(days=7)
STAGEABLE = {VersionStatus.ACTIVE, VersionStatus.DRAFT, VersionStatus.IN_REVIEW}


def rollout_context(skill: Skill, versions: list[SkillVersion], *, is_owner: bool) -> dict:
    """The skill page's rollout panel: the stage, a row per version that serves calls, and the audit."""
    stage = rollouts.stage_of(skill)
    until = timezone.now()
    figures = hooks.version_figures(skill_name=skill.name, since=until - FIGURES_WINDOW, until=until)
    staged = stage.staged.version.version if stage.staged else None
    everyone = stage.everyone.version if stage.everyone else None
    rows = []
    for version in versions:
        if version.status not in (VersionStatus.ACTIVE, VersionStatus.DEPRECATED) and version.version not in figures:
            continue
        rows.append(
            {
                "version": version,
                "reach": _reach(version.version, stage, is_owner=is_owner, everyone=everyone, staged=staged),
                "figures": figures.get(version.version),
                "error_rate": _percent(figures.get(version.version)),
                "staged": version.version == staged,
                "everyone": version.version == everyone,
                "rolled_back": version.version in stage.rolled_back,
            }
        )
    newest = max(versions, key=lambda v: v.semver, default=None)
    target = newest if newest is not None and newest.status in STAGEABLE else None
    return {
        "stage": stage,
        "rollout_target": target,
        "rollout_publishes": target is not None and target.status != VersionStatus.ACTIVE,
        "rollout_rows": rows,
        "rollout_events": list(skill.rollout_events.select_related("actor")[:20]) if is_owner else [],
        "rollout_form": RolloutForm(),
        "figures_days": FIGURES_WINDOW.days,
    }


def _percent(figures) -> str:
    if figures is None or not figures.calls:
        return "—"
    return f"{100 * figures.errors / figures.calls:.1f} % ({figures.errors})"


def _reach(version: str, stage: rollouts.StageView, *, is_owner: bool, everyone: str | None, staged: str | None) -> str:
    if version == staged:
        rollout = stage.staged
        if rollout.percent:
            return f"{rollout.percent} % of runs"
        if is_owner:
            return "canary tenants: " + ", ".join(stage.canary_tenants)
        return f"{len(stage.canary_tenants)} canary tenant{'s' if len(stage.canary_tenants) != 1 else ''}"
    if version == everyone:
        return "everyone else" if staged else "everyone"
    if version in stage.rolled_back:
        return "rolled back: nobody new"
    return "by exact version only"


def staged_by_skill(skill_ids: list[int], *, owned_team_ids: set[int], is_admin: bool) -> dict[int, str]:
    """For the registry list: skill pk → "1.1.0 staged to 10 % of runs · errors 4.0 % vs 1.2 %, p95 310 vs
    220 ms" for each skill with a staged version (canary tenants named only to the skill's owners and platform
    admins). Two queries for the page, and one per staged skill for its figures."""
    staged = (
        Rollout.objects.filter(skill_id__in=skill_ids, state=RolloutState.STAGED)
        .select_related("version", "baseline", "skill")
        .prefetch_related("tenants")
    )
    until = timezone.now()
    summaries = {}
    for rollout in staged:
        tenants = sorted(tenant.slug for tenant in rollout.tenants.all())
        if rollout.percent:
            reach = f"{rollout.percent} % of runs"
        elif is_admin or rollout.skill.owner_team_id in owned_team_ids:
            reach = ", ".join(tenants)
        else:
            reach = f"{len(tenants)} canary tenant{'s' if len(tenants) != 1 else ''}"
        summary = f"{rollout.version.version} staged to {reach}"
        figures = hooks.version_figures(skill_name=rollout.skill.name, since=until - FIGURES_WINDOW, until=until)
        new, old = (
            figures.get(rollout.version.version),
            figures.get(rollout.baseline.version if rollout.baseline_id else ""),
        )
        if new is not None and old is not None:
            summary += f" · errors {_rate(new)} vs {_rate(old)}, p95 {_ms(new.p95_ms)} vs {_ms(old.p95_ms)}"
        summaries[rollout.skill_id] = summary
    return summaries


def _rate(figures) -> str:
    return f"{100 * figures.errors / figures.calls:.1f} %" if figures.calls else "—"


def _ms(value: float | None) -> str:
    return f"{value:.0f} ms" if value is not None else "—"


def _version(name: str, version: str) -> SkillVersion:
    return get_object_or_404(
        SkillVersion.objects.select_related("skill__owner_team"), skill__name=name, version=version
    )


def _changed(request: HttpRequest, found: SkillVersion, change) -> HttpResponse:
    try:
        messages.success(request, change())
    except rollouts.RolloutRefused as exc:
        messages.error(request, exc.message)
    return redirect("registry:skill", name=found.skill.name)


@login_required
@require_POST
def version_rollout(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = _version(name, version)
    form = RolloutForm(request.POST)
    stage = form.stage() if form.is_valid() else {}  # too long a field: refused below as no stage at all

    def change() -> str:
        rollout = rollouts.roll_out_version(version=found, user=request.user, **stage)
        reach = f"{rollout.percent} % of runs" if rollout.percent else ", ".join(stage["tenants"])
        if rollout.version.status == VersionStatus.IN_REVIEW:
            return f"{found} needs a second person's review; once approved it reaches {reach} only."
        return f"Rolled out {found} to {reach}; everyone else stays on {rollout.baseline.version}."

    return _changed(request, found, change)


@login_required
@require_POST
def version_promote(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = _version(name, version)

    def change() -> str:
        rollouts.promote_version(version=found, user=request.user)
        return f"Promoted {found}: every new run gets it."

    return _changed(request, found, change)


@login_required
@require_POST
def version_rollback(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = _version(name, version)

    def change() -> str:
        rollout = rollouts.roll_back_version(version=found, user=request.user)
        return f"Rolled back {found}: new runs get {rollout.baseline.version} again; running ones keep theirs."

    return _changed(request, found, change)
