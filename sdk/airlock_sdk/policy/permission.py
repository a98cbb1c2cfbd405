"""Whether an agent may call a skill at all, before any policy: the offer in the manifest and the grants.

One rule, used by the gate (`runs.authorization.permitted`, which turns a refusal into its typed error)
and by the SDK deciding from a bundle, with the same codes and messages.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

EVERYONE = "*"


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    no_grant: bool = False  # no grant covers the skill at all (the gate then lists what the agent may call)


def pattern_covers(pattern: str, skill_name: str) -> bool:
    """A grant's pattern: an exact name, `namespace.*`, `*`, or an fnmatch pattern."""
    if pattern.endswith(".*"):
        return skill_name.startswith(pattern[:-1])
    if pattern == "*":
        return True
    return fnmatch.fnmatchcase(skill_name, pattern) if "*" in pattern else pattern == skill_name


def is_granted(patterns: Iterable[str], skill_name: str) -> bool:
    return any(pattern_covers(pattern, skill_name) for pattern in patterns)


def _listed(manifest: dict[str, Any], key: str) -> list[str]:
    permissions = manifest.get("permissions") or {}
    values = permissions.get(key) if isinstance(permissions, dict) else None
    return [str(value) for value in values] if isinstance(values, list) else []


def offers_tenant(manifest: dict[str, Any], tenant_slug: str) -> bool:
    tenants = _listed(manifest, "allowed_tenants")
    return EVERYONE in tenants or tenant_slug in tenants


def offers_role(manifest: dict[str, Any], agent_role: str) -> bool:
    roles = _listed(manifest, "allowed_agent_roles")
    return EVERYONE in roles or agent_role in roles


def refusal(
    *,
    name: str,
    manifest: dict[str, Any],
    tenant_slug: str,
    agent_role: str,
    grants: Iterable[tuple[str, list[str]]],
    no_grant_code: str = "no_grant",
) -> Refusal | None:
    """Why this tenant's agent of this role may not call the skill, or None: the skill is offered to the
    tenant and the role, a grant covers it, and one covering grant gives every OAuth scope it needs."""
    if not offers_tenant(manifest, tenant_slug):
        return Refusal("tenant_not_allowed", f"{name} is not offered to this tenant.")
    if not offers_role(manifest, agent_role):
        return Refusal("role_not_allowed", f"{name} is not for agents with the role {agent_role}.")
    permissions = manifest.get("permissions") or {}
    required = set(permissions.get("oauth_scopes") or [])
    covering = [scopes for pattern, scopes in grants if pattern_covers(pattern, name)]
    if not covering:
        return Refusal(no_grant_code, f"No grant lets {agent_role} agents of {tenant_slug} call {name}.", no_grant=True)
    # A grant without scopes does not restrict them; one with scopes must hold all the skill needs.
    if required and not any(not scopes or required <= set(scopes) for scopes in covering):
        return Refusal(
            "missing_scopes" if no_grant_code == "no_grant" else no_grant_code,
            f"{name} needs the scopes {', '.join(sorted(required))}, which no grant gives.",
        )
    return None
