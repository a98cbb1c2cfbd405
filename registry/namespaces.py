"""Which team owns a namespace: claims, requested by a team's member and decided by a platform admin.

A namespace belongs to the team of its most specific approved claim (`support.email` before `support`).
Only that team's skills may be created in it; a namespace no approved claim covers takes a platform
admin's review for the first version of every skill created in it (`needs_platform_review`), and that
approval claims it for the skill's team.
"""

from __future__ import annotations

import re

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.models import Team
from console.tenancy import teams_for
from registry.models import NAMESPACE_PATTERN, ClaimStatus, NamespaceClaim, Skill
from registry.validation import problem

VALID_NAMESPACE = re.compile(NAMESPACE_PATTERN)
# Airlock's own built-in tools live here (`human.ask`): no team may claim it or create skills in it.
RESERVED_NAMESPACES = ("human",)


def reserved(namespace: str) -> str | None:
    return next((name for name in RESERVED_NAMESPACES if covers(name, namespace)), None)


class ClaimRefused(Exception):
    """A claim cannot be made or decided as asked; the message says why."""


def namespace_of(skill_name: str) -> str:
    return skill_name.rsplit(".", 1)[0]


def _covering(namespace: str) -> list[str]:
    """The namespace and each one above it, most specific first: `a.b.c` → `a.b.c`, `a.b`, `a`."""
    parts = namespace.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def covers(claimed: str, namespace: str) -> bool:
    """A claim on `support` covers `support` and `support.email`, not `supportive`."""
    return namespace == claimed or namespace.startswith(claimed + ".")


def owning_claim(namespace: str) -> NamespaceClaim | None:
    """The approved claim that decides who owns `namespace`, or None when nobody does."""
    claims = {
        claim.namespace: claim
        for claim in NamespaceClaim.objects.select_related("team").filter(
            namespace__in=_covering(namespace), status=ClaimStatus.APPROVED
        )
    }
    return next((claims[name] for name in _covering(namespace) if name in claims), None)


def namespace_problems(skill_name: str, team_slug: str) -> list[dict]:
    """Why `team_slug` may not create `skill_name`: its namespace belongs to another team, or to Airlock."""
    if (name := reserved(namespace_of(skill_name))) is not None:
        return [
            problem(
                "$.name",
                "namespace_reserved",
                f"The namespace {name} is reserved for Airlock's built-in tools; choose your team's own namespace.",
            )
        ]
    claim = owning_claim(namespace_of(skill_name))
    if claim is None or claim.team.slug == team_slug:
        return []
    return [
        problem(
            "$.name",
            "namespace_claimed",
            f"The namespace {claim.namespace} belongs to the team {claim.team.slug}: only that team creates "
            f"skills in it, and this manifest names {team_slug}.",
        )
    ]


def needs_platform_review(skill: Skill) -> bool:
    return owning_claim(skill.namespace) is None


def claimable_teams(user):
    """The teams `user` may ask a namespace for: their own (every team for a platform admin)."""
    return teams_for(user)


def require_claimant(user) -> None:
    """Only a member of an owning team (or a platform admin) asks for namespaces: checked before the body."""
    if not claimable_teams(user).exists():
        raise PermissionDenied("Only members of an owning team (or a platform admin) may claim namespaces.")


def _check_namespace(namespace: str) -> str:
    namespace = (namespace or "").strip()
    if not VALID_NAMESPACE.match(namespace) or len(namespace) > 100:
        raise ClaimRefused(
            f"{namespace!r} is not a namespace: lowercase snake-case words separated by dots, such as billing "
            "or support.email."
        )
    if (name := reserved(namespace)) is not None:
        raise ClaimRefused(f"The namespace {name} is reserved for Airlock's built-in tools.")
    return namespace


@transaction.atomic
def request_namespace(*, namespace: str, team: Team, user) -> NamespaceClaim:
    """A member of `team` asks for `namespace`; a platform admin's request is an assignment, approved at once."""
    namespace = _check_namespace(namespace)
    if not (user.is_superuser or team.members.filter(pk=user.pk).exists()):
        raise PermissionDenied(f"Only members of {team.slug} (or a platform admin) may claim namespaces for it.")
    if user.is_superuser:
        return assign_namespace(namespace=namespace, team=team, user=user)
    existing = NamespaceClaim.objects.select_for_update().filter(namespace=namespace).first()
    if existing is not None:
        raise ClaimRefused(f"The namespace {namespace} is already {existing.status} for {existing.team.slug}.")
    owner = owning_claim(namespace)
    if owner is not None and owner.team_id != team.pk:
        raise ClaimRefused(f"The namespace {namespace} is under {owner.namespace}, which belongs to {owner.team.slug}.")
    try:
        with transaction.atomic():  # a savepoint: another team's request may commit between the check and here
            return NamespaceClaim.objects.create(namespace=namespace, team=team, requested_by=user)
    except IntegrityError:
        raise ClaimRefused(f"The namespace {namespace} was just asked for by another team.") from None


def _require_platform_admin(user) -> None:
    if not user.is_superuser:
        raise PermissionDenied("Only a platform admin decides who owns a namespace.")


@transaction.atomic
def assign_namespace(*, namespace: str, team: Team, user=None) -> NamespaceClaim:
    """A platform admin (or an operator's command, `user` None) gives `namespace` to `team`."""
    if user is not None:
        _require_platform_admin(user)
    namespace = _check_namespace(namespace)
    claim, _ = NamespaceClaim.objects.update_or_create(
        namespace=namespace,
        defaults={
            "team": team,
            "status": ClaimStatus.APPROVED,
            "decided_by": user,
            "decided_at": timezone.now(),
        },
        create_defaults={
            "team": team,
            "status": ClaimStatus.APPROVED,
            "requested_by": user,
            "decided_by": user,
            "decided_at": timezone.now(),
        },
    )
    return claim


@transaction.atomic
def approve_claim(*, claim: NamespaceClaim, user) -> NamespaceClaim:
    _require_platform_admin(user)
    claimed = NamespaceClaim.objects.filter(pk=claim.pk, status=ClaimStatus.REQUESTED).update(
        status=ClaimStatus.APPROVED, decided_by=user, decided_at=timezone.now()
    )
    if not claimed:
        raise ClaimRefused(f"The claim on {claim.namespace} is not waiting for a decision.")
    claim.refresh_from_db()
    return claim


@transaction.atomic
def decline_claim(*, claim: NamespaceClaim, user) -> None:
    _require_platform_admin(user)
    if not NamespaceClaim.objects.filter(pk=claim.pk, status=ClaimStatus.REQUESTED).delete()[0]:
        raise ClaimRefused(f"The claim on {claim.namespace} is not waiting for a decision.")
