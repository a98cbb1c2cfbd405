"""Grant lookups the gate and discovery use: no active grant covering a skill, no access."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from airlock_sdk.policy.permission import is_granted

from policies.models import Grant
from registry.review import GrantReach


def active_patterns(*, tenant_id: int, agent_role: str) -> list[str]:
    """The skill patterns an agent role of a tenant holds right now (one query)."""
    return list(
        Grant.objects.active()
        .filter(tenant_id=tenant_id, agent_role=agent_role)
        .values_list("skill_pattern", flat=True)
    )


def granted_names(patterns: Iterable[str], names: Iterable[str]) -> list[str]:
    patterns = list(patterns)
    return sorted(name for name in names if is_granted(patterns, name))


def active_grants(*, tenant_id: int, agent_role: str) -> list[tuple[str, list[str]]]:
    """(pattern, oauth scopes) of the active grants of an agent role in a tenant (one query)."""
    return [
        (pattern, scopes or [])
        for pattern, scopes in Grant.objects.active()
        .filter(tenant_id=tenant_id, agent_role=agent_role)
        .values_list("skill_pattern", "oauth_scopes")
    ]


def active_grants_until(*, tenant_id: int, agent_role: str) -> tuple[list[tuple[str, list[str]]], datetime | None]:
    """`active_grants`, and when the first of them expires (None: none expires): how long the list holds
    without a change to the grants table."""
    rows = list(
        Grant.objects.active()
        .filter(tenant_id=tenant_id, agent_role=agent_role)
        .values_list("skill_pattern", "oauth_scopes", "expires_at")
    )
    expiries = [expires_at for _, _, expires_at in rows if expires_at is not None]
    return [(pattern, scopes or []) for pattern, scopes, _ in rows], min(expiries, default=None)


def grants_covering(skill_name: str) -> list[GrantReach]:
    """Every tenant's active grant that covers `skill_name`: who a new version of it would reach."""
    return [
        GrantReach(
            tenant_slug=grant.tenant.slug,
            tenant_name=grant.tenant.name,
            agent_role=grant.agent_role,
            skill_pattern=grant.skill_pattern,
        )
        for grant in Grant.objects.active().select_related("tenant")
        if grant.covers(skill_name)
    ]
