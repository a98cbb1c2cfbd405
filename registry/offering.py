"""Who a skill version is offered to: the one rule for a manifest's `permissions` lists.

A version is offered to a tenant and an agent role when its `allowed_tenants` and
`allowed_agent_roles` name them or hold `"*"`. The manifest schema requires both lists; a
manifest without one (never valid, but possible in old rows) is offered to nobody.
"""

from __future__ import annotations

from typing import Any

from airlock_sdk.policy.permission import EVERYONE, offers_role, offers_tenant


def offered_to(manifest: dict[str, Any], *, tenant_slug: str, agent_role: str) -> bool:
    """Whether this version is offered to agents of this tenant with this role."""
    return offers_tenant(manifest, tenant_slug) and offers_role(manifest, agent_role)


def named_roles(manifest: dict[str, Any]) -> list[str]:
    """The agent roles a version names (not `"*"`), for a person choosing one to try it as."""
    return [role for role in (manifest.get("permissions") or {}).get("allowed_agent_roles", []) if role != EVERYONE]


__all__ = ["EVERYONE", "named_roles", "offered_to", "offers_role", "offers_tenant"]
