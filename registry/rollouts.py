"""Staged rollout: a published version reaches canary tenants or a share of runs first, then everyone
(promote), or nobody new (rollback). Each change publishes a snapshot whose `rollouts` section runtimes
resolve through (registry.stages); runs pinned to an older snapshot keep the version they had.

Only the skill's owning team and platform admins change a rollout (the same rule as publishing); every
change is recorded as a `RolloutEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from console.models import Tenant
from registry import services
from registry.models import (
    Rollout,
    RolloutAction,
    RolloutEvent,
    RolloutState,
    Skill,
    SkillVersion,
    VersionStatus,
)
from registry.snapshots import publish_snapshot

MAX_CANARY_TENANTS = 50


class RolloutRefused(Exception):
    """A rollout, promotion or rollback that cannot be done: `code` says which rule, `field` which input."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


def rollouts_section() -> tuple[str, list[dict]]:
    """Staged and rolled-back versions (promoted ones are simply active): registry.snapshots.SNAPSHOT_SECTIONS."""
    rows = (
        Rollout.objects.exclude(state=RolloutState.PROMOTED)
        .filter(version__status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED])
        .select_related("skill", "version", "baseline")
        .prefetch_related("tenants")
        .order_by("skill__name", "version__major", "version__minor", "version__patch")
    )
    entries = []
    for rollout in rows:
        tenants = sorted(rollout.tenants.all(), key=lambda tenant: tenant.slug)
        entries.append(
            {
                "name": rollout.skill.name,
                "version": rollout.version.version,
                "state": rollout.state,
                "baseline": rollout.baseline.version if rollout.baseline_id else None,
                "tenant_ids": [tenant.pk for tenant in tenants],
                "tenants": [tenant.slug for tenant in tenants],
                "percent": rollout.percent,
            }
        )
    return "rollouts", entries


# --- reading ----------------------------------------------------------------------------------------


def _withheld_ids(skill: Skill) -> set[int]:
    return set(skill.rollouts.filter(state=RolloutState.ROLLED_BACK).values_list("version_id", flat=True))


def everyones_version(skill: Skill, *, below: SkillVersion | None = None) -> SkillVersion | None:
    """The newest active version not rolled back and not staged (below `below` when given): what every
    run outside a stage gets."""
    excluded = _withheld_ids(skill) | set(
        skill.rollouts.filter(state=RolloutState.STAGED).values_list("version_id", flat=True)
    )
    candidates = skill.versions.filter(status=VersionStatus.ACTIVE).exclude(pk__in=excluded)
    ordered = sorted(candidates, key=lambda version: version.semver, reverse=True)
    if below is not None:
        ordered = [version for version in ordered if version.semver < below.semver]
    return ordered[0] if ordered else None


@dataclass
class StageView:
    """Who is on which version of one skill, for the registry list and the skill page."""

    everyone: SkillVersion | None
    staged: Rollout | None
    canary_tenants: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)


def stage_of(skill: Skill) -> StageView:
    staged = skill.rollouts.filter(state=RolloutState.STAGED).select_related("version", "baseline").first()
    return StageView(
        everyone=everyones_version(skill),
        staged=staged,
        canary_tenants=sorted(staged.tenants.values_list("slug", flat=True)) if staged else [],
        rolled_back=sorted(
            skill.rollouts.filter(state=RolloutState.ROLLED_BACK).values_list("version__version", flat=True)
        ),
    )


# --- input ------------------------------------------------------------------------------------------


def parse_stage(*, tenants: object = None, percent: object = None) -> tuple[list[Tenant], int | None]:
    """The stage an owner asked for: existing tenants by slug, or a whole percent between 1 and 99."""
    if (tenants is None) == (percent is None):
        raise RolloutRefused("invalid_stage", "Give either tenants (a list of tenant slugs) or percent (1 to 99).")
    if percent is not None:
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 < percent < 100:
            raise RolloutRefused(
                "invalid_percent",
                "percent must be a whole number from 1 to 99 (promote to reach every run).",
                "percent",
            )
        return [], percent
    if not isinstance(tenants, list) or not tenants or not all(isinstance(slug, str) and slug for slug in tenants):
        raise RolloutRefused("invalid_tenants", "tenants must be a non-empty list of tenant slugs.", "tenants")
    if len(tenants) > MAX_CANARY_TENANTS:
        raise RolloutRefused("invalid_tenants", f"At most {MAX_CANARY_TENANTS} canary tenants.", "tenants")
    found = {tenant.slug: tenant for tenant in Tenant.objects.filter(slug__in=tenants)}
    unknown = sorted(set(tenants) - set(found))
    if unknown:
        raise RolloutRefused("unknown_tenant", f"No tenant {', '.join(unknown)} exists.", "tenants")
    return [found[slug] for slug in dict.fromkeys(tenants)], None


# --- writes -----------------------------------------------------------------------------------------


def require_owner(version: SkillVersion, user) -> None:
    """PermissionDenied unless `user` may change this skill: the publishing rule (registry.services)."""
    services._require_owner(version.skill, user)


def _locked(version: SkillVersion, user) -> tuple[Skill, SkillVersion]:
    """Check the owner (before anything else: a non-owner learns nothing), then lock the skill row, which
    orders every rollout change of one skill, and read the version again under the lock."""
    require_owner(version, user)
    skill = Skill.objects.select_for_update().select_related("owner_team").get(pk=version.skill_id)
    return skill, SkillVersion.objects.select_related("skill").get(pk=version.pk)


def _record(rollout: Rollout, action: str, user, reason: str) -> Rollout:
    rollout.updated_at = timezone.now()
    rollout.save()
    snapshot = publish_snapshot(reason=reason)
    RolloutEvent.objects.create(
        skill=rollout.skill,
        version=rollout.version.version,
        action=action,
        actor=user if user is not None and user.is_authenticated else None,
        tenants=sorted(rollout.tenants.values_list("slug", flat=True)) if action == RolloutAction.ROLLOUT else [],
        percent=rollout.percent if action == RolloutAction.ROLLOUT else None,
        baseline=rollout.baseline.version if rollout.baseline_id else "",
        snapshot_number=snapshot.number,
    )
    return rollout


@transaction.atomic
def roll_out_version(
    *, version: SkillVersion, user, tenants: object = None, percent: object = None, publish: bool = False
) -> Rollout:
    """Serve a version to canary tenants or a share of runs only; everyone else keeps the version below.
    Rolling out the staged version again changes its stage (widen 10 % to 50 %, add a tenant).

    A version must be active, unless `publish` is set: then a draft is published straight into the stage
    (the stage is stored first, so the snapshot that makes the version active already holds it back), and a
    version that goes to review, or is already in review, enters the stage when it is approved.
    """
    skill, version = _locked(version, user)
    canaries, share = parse_stage(tenants=tenants, percent=percent)
    publishable = {VersionStatus.DRAFT, VersionStatus.IN_REVIEW} if publish else set()
    if version.status != VersionStatus.ACTIVE and version.status not in publishable:
        hint = "; pass publish to publish a draft straight into a stage" if version.status == "draft" else ""
        raise RolloutRefused(
            "not_published", f"Only a published, active version can be rolled out; {version} is {version.status}{hint}."
        )
    newer = [v for v in skill.versions.filter(status=VersionStatus.ACTIVE) if v.semver > version.semver]
    if newer:
        raise RolloutRefused("not_newest", f"{skill.name}@{newer[0].version} is newer; roll out the newest version.")
    staged = skill.rollouts.filter(state=RolloutState.STAGED).exclude(version=version).select_related("version")
    if staged.exists():
        raise RolloutRefused("rollout_in_progress", f"{staged[0].version} is staged; promote it or roll it back first.")
    baseline = everyones_version(skill, below=version)
    if baseline is None:
        raise RolloutRefused(
            "no_baseline",
            f"{version} has no earlier active version for the other tenants to keep; publish it to everyone.",
        )
    rollout, _ = Rollout.objects.get_or_create(version=version, defaults={"skill": skill})
    rollout.state, rollout.percent, rollout.baseline = RolloutState.STAGED, share, baseline
    rollout.save()
    rollout.tenants.set(canaries)
    if version.status == VersionStatus.DRAFT:
        rollout.version = services.publish_version(version=version, user=user)
    stage = f"{share} % of runs" if share else f"{len(canaries)} canary tenant{'s' if len(canaries) != 1 else ''}"
    return _record(rollout, RolloutAction.ROLLOUT, user, f"rolled out {version} to {stage}")


@transaction.atomic
def promote_version(*, version: SkillVersion, user) -> Rollout:
    """The staged version becomes the one everyone gets, from the next run on."""
    skill, version = _locked(version, user)
    rollout = Rollout.objects.filter(version=version, state=RolloutState.STAGED).first()
    if rollout is None:
        raise RolloutRefused("not_staged", f"{version} is not staged; roll it out before promoting it.")
    if version.status != VersionStatus.ACTIVE:
        raise RolloutRefused("not_published", f"{version} is {version.status}; it can be promoted once it is active.")
    rollout.state = RolloutState.PROMOTED
    return _record(rollout, RolloutAction.PROMOTE, user, f"promoted {version} to everyone")


@transaction.atomic
def roll_back_version(*, version: SkillVersion, user) -> Rollout:
    """Nobody new gets this version: new runs (and runs that start their calls from a newer snapshot) get
    the version below it again. Works on a staged version and on the one everyone is on."""
    skill, version = _locked(version, user)
    rollout = Rollout.objects.filter(version=version).select_related("baseline").first()
    if rollout is not None and rollout.state == RolloutState.ROLLED_BACK:
        raise RolloutRefused("already_rolled_back", f"{version} is already rolled back.")
    if (rollout is None or rollout.state == RolloutState.PROMOTED) and everyones_version(skill) != version:
        raise RolloutRefused("not_current", f"{version} is neither staged nor the version everyone is on.")
    baseline = everyones_version(skill, below=version)
    if baseline is None:
        raise RolloutRefused("no_baseline", f"{version} has no earlier active version to go back to.")
    rollout = rollout or Rollout(skill=skill, version=version)
    rollout.state, rollout.baseline = RolloutState.ROLLED_BACK, baseline
    return _record(rollout, RolloutAction.ROLLBACK, user, f"rolled back {version} to {baseline.version}")


__all__ = [
    "RolloutRefused",
    "StageView",
    "everyones_version",
    "parse_stage",
    "promote_version",
    "roll_back_version",
    "require_owner",
    "roll_out_version",
    "rollouts_section",
    "stage_of",
]
