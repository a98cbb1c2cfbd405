"""The tools a run may call: read from the snapshot the run pinned when it started, so the list a model
plans around does not change when a new snapshot is published mid-conversation.

Two live facts still narrow it, because both are refusals the gate would give anyway: a skill version
retired after the run started drops out, and so does a skill whose grant was revoked. A skill published
or granted later appears only in the next run.
"""

from __future__ import annotations

from console.models import Agent
from policies import grants as grant_lookup
from registry.discovery import discoverable_entries
from registry.snapshots import SnapshotIndex, index_for, latest_index
from runs import gate_cache
from runs.authorization import CALLABLE_STATUSES
from runs.models import Run


def callable_entries(
    run: Run,
    *,
    index: SnapshotIndex | None = None,
    grants: list[tuple[str, list[str]]] | None = None,
    generation: gate_cache.Generation = None,
) -> list[dict]:
    """The newest active version of each skill this run's agent may call now, by name, from the pinned snapshot.

    `index` and `grants` are what the caller already loaded for this run (the gate has both); without
    them they are read here.
    """
    return _narrowed(run.agent, run.tenant_id, index or index_for(run.snapshot), grants=grants, generation=generation)


def callable_entries_now(agent: Agent) -> list[dict]:
    """What a run this agent starts now would list: the newest snapshot, narrowed the same way. For a list
    that belongs to no run (a sessionless MCP `tools/list`), whose calls each start a run of their own."""
    return _narrowed(agent, agent.tenant_id, latest_index())


def _narrowed(
    agent: Agent,
    tenant_id: int,
    index: SnapshotIndex,
    *,
    grants: list[tuple[str, list[str]]] | None = None,
    generation: gate_cache.Generation = None,
) -> list[dict]:
    permitted = discoverable_entries(agent, index)
    if grants is None:
        grants = gate_cache.active_grants(tenant_id=tenant_id, agent_role=agent.role, generation=generation)
    granted = set(grant_lookup.granted_names([pattern for pattern, _ in grants], [e["name"] for e in permitted]))
    statuses = gate_cache.version_statuses(
        [entry["skill_version_id"] for entry in permitted if entry["name"] in granted], generation=generation
    )
    return [
        entry
        for entry in permitted
        if entry["name"] in granted and statuses.get(entry["skill_version_id"]) in CALLABLE_STATUSES
    ]


def callable_names(run: Run, **loaded) -> list[str]:
    return [entry["name"] for entry in callable_entries(run, **loaded)]
