"""The documented context a policy sees (docs/policies.md), built the same way by the gate and the SDK, and the
manifest facts the decision kernel reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def call_context(
    *,
    skill: dict[str, Any],
    arguments: dict,
    agent_id: int | str,
    agent_name: str,
    agent_role: str,
    end_user: str,
    end_user_roles: Iterable[str],
    tenant_slug: str,
    tainted: bool,
    taint_source: str,
) -> dict:
    """`skill` holds name, version, effect, data_class and namespace."""
    return {
        "skill": {key: skill[key] for key in ("name", "version", "effect", "data_class", "namespace")},
        "args": arguments,
        "agent": {"id": agent_id, "name": agent_name, "role": agent_role},
        "end_user": {"id": end_user, "roles": list(end_user_roles)},
        "tenant": {"slug": tenant_slug},
        "run": {"tainted": tainted, "taint_source": taint_source},
    }


def approval_required(manifest: dict[str, Any]) -> bool:
    """The manifest itself asks for a person (`risk.approval`), whatever the policy says."""
    return (manifest.get("risk") or {}).get("approval") in ("required", "two_person")


CLIENT_SCHEME = "client:"


def is_client_skill(manifest: dict[str, Any]) -> bool:
    """The agent's own SDK runs it (`execution.adapter: client:<name>`): Airlock decides, the agent executes."""
    return str((manifest.get("execution") or {}).get("adapter", "")).startswith(CLIENT_SCHEME)
