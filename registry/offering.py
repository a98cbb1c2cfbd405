"""Who a skill version is offered to: the one rule for a manifest's `permissions` lists.

A version is offered to a tenant and an agent role when its `allowed_tenants` and
`allowed_agent_roles` name them or hold `"*"`. The manifest schema requires both lists; a
manifest without one (never valid, but possible in old rows) is offered to nobody.
"""

from __future__ import annotations

from typing import Any

EVERYONE = "*"


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


def offered_to(manifest: dict[str, Any], *, tenant_slug: str, agent_role: str) -> bool:
    """Whether this version is offered to agents of this tenant with this role."""
    return offers_tenant(manifest, tenant_slug) and offers_role(manifest, agent_role)


__all__ = ["EVERYONE", "offered_to", "offers_role", "offers_tenant"]
