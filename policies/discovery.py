"""Discovery filter: an agent is shown only the skills its role's active grants cover."""

from __future__ import annotations

from policies.grants import active_patterns, is_granted


def granted_only(agent, entries: list[dict]) -> list[dict]:
    patterns = active_patterns(tenant_id=agent.tenant_id, agent_role=agent.role)
    return [entry for entry in entries if is_granted(patterns, entry["name"])]
