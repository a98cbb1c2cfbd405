"""Registry use cases: drafts, publication (with second-person review), deprecation, retirement.

Every change runtimes must see publishes a signed snapshot in the same transaction.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from console.models import Team
from lib.canonical import sha256_of
from registry import contracts, fallbacks, hooks, namespaces, review, trials
from registry.models import (
    LIFECYCLE_MANIFEST_KEYS,
    PUBLISHED_STATUSES,
    DiscoveryEvaluation,
    Skill,
    SkillVersion,
    VersionStatus,
)
from registry.snapshots import publish_snapshot
from registry.validation import parse_semver, problem, validate_manifest


class ManifestInvalid(Exception):
    """The manifest cannot be stored or published; `errors` lists each problem with its JSON path."""

    def __init__(self, errors: list[dict]) -> None:
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))
        self.errors = errors


def latest_published(skill: Skill | None) -> SkillVersion | None:
    if skill is None:
        return None
    return skill.versions.filter(status__in=PUBLISHED_STATUSES).order_by("-major", "-minor", "-patch").first()


def _require_owner(skill: Skill, user) -> None:
    if not skill.is_owned_by(user):
        raise PermissionDenied(f"Only the {skill.owner_team.slug} team or a platform admin may change {skill.name}.")


def _require_member_of_named_team(manifest: dict, user) -> None:
    """A new skill's author belongs to the team its manifest names (an unknown team is a validation error)."""
    ownership = manifest.get("ownership") if isinstance(manifest.get("ownership"), dict) else {}
    team = Team.objects.filter(slug=str(ownership.get("team") or "")).first()
    if team is not None and not (user.is_superuser or team.members.filter(pk=user.pk).exists()):
        raise PermissionDenied(f"Only members of {team.slug} (or a platform admin) may create its skills.")


def check_manifest(*, manifest: dict, skill: Skill | None = None, imported_from: dict | None = None) -> list[dict]:
    """Validation errors for a manifest submitted as a new version of `skill` (or a new skill): the manifest's
    own, then what its namespace's owner and its adapter's declaration allow (`imported_from`: the MCP tool
    being imported, whose declaration no version records yet)."""
    previous = latest_published(skill)
    errors = validate_manifest(manifest, skill=skill, previous=previous)
    ownership = manifest.get("ownership") if isinstance(manifest.get("ownership"), dict) else {}
    team_slug = skill.owner_team.slug if skill is not None else ownership.get("team")
    name = skill.name if skill is not None else manifest.get("name")
    well_formed = not errors  # the declaration is compared with a manifest of the right shape only
    if previous is None and isinstance(name, str) and isinstance(team_slug, str):
        errors += namespaces.namespace_problems(name, team_slug)
    if well_formed:
        errors += contracts.contract_problems(
            manifest, team_slug if isinstance(team_slug, str) else None, imported_from=imported_from
        )
        errors += trials.sandbox_problems(manifest, team_slug if isinstance(team_slug, str) else None)
        errors += trials.manifest_test_problems(manifest)
        errors += fallbacks.fallback_problems(manifest)
    if skill is not None and isinstance(manifest.get("ownership"), dict):
        team = manifest["ownership"].get("team")
        if team not in (None, skill.owner_team.slug):
            errors.append(
                problem(
                    "$.ownership.team",
                    "team_mismatch",
                    f"{skill.name} is owned by {skill.owner_team.slug}; transfer is not a version change.",
                )
            )
    return errors


@transaction.atomic
def create_draft_version(
    *, manifest: dict, author, skill: Skill | None = None, imported_from: dict | None = None
) -> SkillVersion:
    """Store a validated manifest as a draft: of `skill`, or of a new skill named in the manifest.

    Re-submitting the version number of an existing draft replaces that draft; published
    versions are never touched (immutability), a new version number is needed instead.
    `imported_from` (an MCP import, `registry.mcp_import`) records the tool and its annotations, and marks
    the guessed risk fields unconfirmed.
    """
    if author is not None:  # authorization before validation: a non-owner learns nothing
        if skill is not None:
            _require_owner(skill, author)
        else:
            _require_member_of_named_team(manifest, author)
    errors = check_manifest(manifest=manifest, skill=skill, imported_from=imported_from)
    existing = skill.versions.filter(version=manifest.get("version")).first() if skill else None
    if existing is not None and existing.status != VersionStatus.DRAFT:
        errors.append(
            problem(
                "$.version",
                "version_exists",
                f"{skill.name}@{existing.version} is {existing.status} and immutable; use a new version number.",
            )
        )
    if errors:
        raise ManifestInvalid(errors)
    if skill is None:
        team = Team.objects.get(slug=manifest["ownership"]["team"])
        skill = Skill.objects.create(
            skill_id=manifest["skill_id"],
            name=manifest["name"],
            namespace=manifest["name"].rsplit(".", 1)[0],
            owner_team=team,
        )
    elif author is not None:  # None: an operator's command (import_mcp), not a person in the console
        _require_owner(skill, author)
    stored = {key: value for key, value in manifest.items() if key not in LIFECYCLE_MANIFEST_KEYS}
    stored["skill_id"] = skill.skill_id
    major, minor, patch = parse_semver(manifest["version"])
    version = existing or SkillVersion(skill=skill, version=manifest["version"])
    version.major, version.minor, version.patch = major, minor, patch
    version.manifest = stored
    version.effect = manifest["risk"]["effect"]
    version.data_classification = manifest["risk"]["data_classification"]
    version.description = manifest["description"]
    version.author = author
    if imported_from:
        version.imported_from, version.defaults_confirmed = imported_from, False
    version.save()
    return version


@transaction.atomic
def confirm_imported_defaults(*, version: SkillVersion, user) -> SkillVersion:
    """An owner accepts the risk defaults an MCP import guessed, so the draft may be published."""
    _require_owner(version.skill, user)
    version.defaults_confirmed = True
    version.save(update_fields=["defaults_confirmed"])
    return version


def review_reasons(version: SkillVersion) -> list[str]:
    """Why a second person must review this version (`registry.review`): where calls and credentials go,
    a changed effect class, a lowered approval or data class, output marked trusted, widened permissions."""
    previous = latest_published(version.skill)
    if previous is not None:
        return review.reasons(previous.manifest, version.manifest)
    scanned = [
        f"the imported MCP tool's definition {found}" for found in (version.imported_from or {}).get("findings", [])
    ]
    return (
        review.reasons(None, version.manifest)
        + [finding.reason for finding in first_version_findings(version)]
        + scanned
    )


def first_version_findings(version: SkillVersion) -> list[review.Finding]:
    """What the registry's own records add to a first version's review: an unclaimed namespace, and code
    that another skill already runs or that declares something else."""
    found = []
    if namespaces.needs_platform_review(version.skill):
        found.append(
            review.Finding(
                "$.name",
                f"the namespace {version.skill.namespace} belongs to no team: a platform admin reviews its first skill",
            )
        )
    return found + contracts.first_version_findings(version.manifest, version.skill)


def needs_platform_review(version: SkillVersion) -> bool:
    """A first version in a namespace no team owns is reviewed by a platform admin, not by the team."""
    return latest_published(version.skill) is None and namespaces.needs_platform_review(version.skill)


def review_base(version: SkillVersion) -> SkillVersion | None:
    """The version a review compares with: the newest published one below it (None for a first version)."""
    below = [v for v in version.skill.versions.filter(status__in=PUBLISHED_STATUSES) if v.semver < version.semver]
    return max(below, key=lambda v: v.semver, default=None)


def _activate(version: SkillVersion, *, reviewer=None, reason: str = "") -> SkillVersion:
    version.status = VersionStatus.ACTIVE
    version.published_at = timezone.now()
    version.reviewer = reviewer
    version.save(update_fields=["status", "published_at", "reviewer"])
    publish_snapshot(reason=reason or f"published {version.skill.name}@{version.version}")
    return version


def _publishable_draft(version: SkillVersion) -> SkillVersion:
    if version.status != VersionStatus.DRAFT:
        raise ManifestInvalid(
            [problem("$.status", "not_a_draft", f"Only drafts can be published; this is {version.status}.")]
        )
    errors = check_manifest(manifest=version.manifest, skill=version.skill)
    if not version.defaults_confirmed:
        errors.append(
            problem(
                "$.risk",
                "unconfirmed_import",
                "These risk and execution fields were guessed from MCP annotations; "
                "confirm or edit them before publishing.",
            )
        )
    if errors:
        raise ManifestInvalid(errors)
    return version


def failed_test_problems(tested) -> list[dict]:
    """A failed test run as the errors publishing answers with, one per failing test."""
    return [
        problem(
            f"$.tests[{index}]",
            "skill_test_failed",
            f"Test {result['name']!r} failed: {'; '.join(result['failures'])}",
        )
        for index, result in enumerate(tested.results)
        if not result["passed"]
    ]


def _passing_tests(version: SkillVersion, user) -> str | None:
    """Run the draft's manifest tests (outside the publishing transaction, so a failure stays recorded on
    the version); the manifest hash they passed for, or None when it has no tests."""
    if not version.manifest.get("tests"):
        return None
    tested = hooks.run_skill_tests(version=version, trigger="publish", user=user)
    if not tested.passed:
        raise ManifestInvalid(failed_test_problems(tested))
    return tested.manifest_sha256


def _still_tested(version: SkillVersion, tested_sha: str | None) -> None:
    if version.manifest.get("tests") and sha256_of(version.manifest) != tested_sha:
        raise ManifestInvalid(
            [problem("$.tests", "tests_stale", "The draft changed while its tests ran; publish it again.")]
        )


def publish_version(*, version: SkillVersion, user) -> SkillVersion:
    """Make a draft active, or put it in review when `review_reasons` finds a reason (the previous
    active version keeps serving until another person approves). A draft with `tests` must pass them
    first; the failures are kept on the version (`SkillTestRun`) and returned as errors."""
    version = SkillVersion.objects.select_related("skill__owner_team").get(pk=version.pk)
    _require_owner(version.skill, user)
    _publishable_draft(version)
    return _publish_tested(version=version, user=user, tested_sha=_passing_tests(version, user))


@transaction.atomic
def _publish_tested(*, version: SkillVersion, user, tested_sha: str | None) -> SkillVersion:
    version = SkillVersion.objects.select_for_update().select_related("skill__owner_team").get(pk=version.pk)
    _require_owner(version.skill, user)
    _publishable_draft(version)
    _still_tested(version, tested_sha)
    reasons = review_reasons(version)
    if reasons:
        version.status = VersionStatus.IN_REVIEW
        version.review_reasons = reasons
        version.save(update_fields=["status", "review_reasons"])
        return version
    return _activate(version)


def publish_as_operator(*, version: SkillVersion, command: str) -> SkillVersion:
    """An operator's command at the shell (`simulate_agents`) publishes without a second person.

    Whoever runs manage.py already holds the database and the signing key, so a review would
    protect nothing; the reasons are still kept on the version and the snapshot names the command.
    The manifest's tests still gate it: they say whether the version works, not who may ship it.
    """
    _publishable_draft(version)
    return _publish_as_operator(version=version, command=command, tested_sha=_passing_tests(version, None))


@transaction.atomic
def _publish_as_operator(*, version: SkillVersion, command: str, tested_sha: str | None) -> SkillVersion:
    version = SkillVersion.objects.select_for_update().select_related("skill__owner_team").get(pk=version.pk)
    _publishable_draft(version)
    _still_tested(version, tested_sha)
    version.review_reasons = review_reasons(version)
    version.save(update_fields=["review_reasons"])
    return _activate(version, reason=f"published {version.skill.name}@{version.version} by {command}")


def can_review(version: SkillVersion, user) -> bool:
    return (
        version.status == VersionStatus.IN_REVIEW
        and user.is_authenticated
        and user.pk != version.author_id
        and version.skill.is_owned_by(user)
        and (user.is_superuser or not needs_platform_review(version))
    )


@transaction.atomic
def approve_version(*, version: SkillVersion, user) -> SkillVersion:
    """A second person (owning-team member or platform admin, never the author) activates a version in review."""
    version = SkillVersion.objects.select_for_update().select_related("skill__owner_team").get(pk=version.pk)
    _require_owner(version.skill, user)  # before the state check: a non-owner gets 403, not the version's status
    if version.status != VersionStatus.IN_REVIEW:
        raise ManifestInvalid([problem("$.status", "not_in_review", "This version is not waiting for review.")])
    if user.pk == version.author_id:
        raise PermissionDenied("The author cannot review their own version; ask another team member.")
    if needs_platform_review(version):
        if not user.is_superuser:
            raise PermissionDenied(
                f"The namespace {version.skill.namespace} belongs to no team: a platform admin reviews this version."
            )
        namespaces.assign_namespace(namespace=version.skill.namespace, team=version.skill.owner_team, user=user)
    return _activate(version, reviewer=user)


def _resolve_replacement(skill: Skill, replacement: Skill | None) -> Skill | None:
    if replacement is None:
        return None
    if replacement.pk == skill.pk:
        raise ManifestInvalid(
            [problem("$.compatibility.replacement_skill_id", "replacement_is_self", "A skill cannot replace itself.")]
        )
    if not replacement.versions.filter(status=VersionStatus.ACTIVE).exists():
        raise ManifestInvalid(
            [
                problem(
                    "$.compatibility.replacement_skill_id",
                    "replacement_not_active",
                    f"The replacement {replacement.name} has no active version.",
                )
            ]
        )
    return replacement


@transaction.atomic
def deprecate_skill(
    *, skill: Skill, user, replacement: Skill | None = None, sunset_at: datetime | None = None
) -> Skill:
    """Hide the skill from discovery; its versions stay callable by exact version until `sunset_at`."""
    _require_owner(skill, user)
    replacement = _resolve_replacement(skill, replacement)
    if sunset_at is not None and sunset_at <= timezone.now():
        raise ManifestInvalid(
            [problem("$.compatibility.sunset_at", "sunset_in_past", "The sunset must be in the future.")]
        )
    changed = skill.versions.filter(status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED]).update(
        status=VersionStatus.DEPRECATED,
        deprecated_at=timezone.now(),
        replacement=replacement,
        sunset_at=sunset_at,
    )
    if not changed:
        raise ManifestInvalid([problem("$.status", "nothing_to_deprecate", f"{skill.name} has no published version.")])
    publish_snapshot(reason=f"deprecated {skill.name}")
    return skill


@transaction.atomic
def retire_skill(*, skill: Skill, user, replacement: Skill | None = None) -> Skill:
    """Make the skill unknown to runtimes: every published version is retired. A `replacement` is named in
    the error a run that pinned an older snapshot gets; without one, a deprecation's replacement stays."""
    _require_owner(skill, user)
    replacement = _resolve_replacement(skill, replacement)
    retiring = skill.versions.filter(
        status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED, VersionStatus.IN_REVIEW]
    )
    changes = {"status": VersionStatus.RETIRED, "retired_at": timezone.now()}
    if replacement is not None:
        changes["replacement"] = replacement
    retiring.update(**changes)
    publish_snapshot(reason=f"retired {skill.name}")
    return skill


@transaction.atomic
def record_discovery_evaluation(*, catalog: str, database: str, namespaces: dict[str, dict]) -> int:
    """Keep the latest evaluation figures per namespace of `catalog` (the harness's scores by namespace);
    namespaces the new run no longer has are dropped. Returns how many namespaces were stored."""
    DiscoveryEvaluation.objects.filter(catalog=catalog).exclude(namespace__in=list(namespaces)).delete()
    now = timezone.now()
    for namespace, scores in namespaces.items():
        DiscoveryEvaluation.objects.update_or_create(
            catalog=catalog,
            namespace=namespace,
            defaults={
                "database": database,
                "intents": scores["intents"],
                "recall_at_1": scores["recall_at_1"],
                "recall_at_5": scores["recall_at_5"],
                "mrr": scores["mrr"],
                "p95_ms": scores["p95_ms"],
                "leaks": scores["leaks"],
                "evaluated_at": now,
            },
        )
    return len(namespaces)
