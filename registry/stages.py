"""Which version of a skill a caller gets while a version is staged: the one rule, read from the snapshot.

A snapshot's `rollouts` section (registry.rollouts.rollouts_section) lists each staged version with its
canary tenants or its share of runs, and each rolled-back version. `SnapshotIndex.resolve` asks `reaches`
whether a version reaches this caller; a staged version that does not, and a rolled-back one, are skipped,
so the caller gets the version below (the baseline everyone else is on).

A share of runs is chosen by hashing the run's id with the skill's name and version
(`airlock_sdk.policy.audience`, the rule the SDK applies to a decision bundle's `share_of_runs` too), so it
needs no write, a run never sees two versions while it keeps its snapshot, and a run inside 10 % stays inside
at 50 %. A decision bundle (policies.bundles) holds what `reaches` the agent's tenant, and marks what reaches
only a share of its runs (`runs_share`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airlock_sdk.policy.audience import SHARE_POINTS, in_share, share_point


@dataclass(frozen=True)
class Audience:
    """Who is asking: a tenant and, inside a run, the run (a share of runs is chosen by its id)."""

    tenant_id: int | None
    run_key: str = ""

    @classmethod
    def of_run(cls, run: Any) -> Audience:
        return cls(tenant_id=run.tenant_id, run_key=str(run.pk))


def in_stage(stage: dict, name: str, audience: Audience | None) -> bool:
    """Whether a staged version (a `rollouts` entry) reaches this caller."""
    if audience is None:
        return False
    if audience.tenant_id is not None and audience.tenant_id in stage.get("tenant_ids", []):
        return True
    return in_share(audience.run_key, name, stage["version"], stage.get("percent"))


@dataclass(frozen=True)
class Stages:
    """A snapshot's rollouts, indexed: the staged version of each skill, and the rolled-back ones."""

    staged: dict[str, dict]
    withheld: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, rollouts: list[dict]) -> Stages:
        return cls(
            staged={entry["name"]: entry for entry in rollouts if entry["state"] == "staged"},
            withheld=frozenset((e["name"], e["version"]) for e in rollouts if e["state"] == "rolled_back"),
        )

    def reaches(self, name: str, version: str, audience: Audience | None) -> bool:
        if (name, version) in self.withheld:
            return False
        stage = self.staged.get(name)
        return stage is None or stage["version"] != version or in_stage(stage, name, audience)

    def runs_share(self, name: str, version: str, tenant_id: int) -> int | None:
        """The percent of the tenant's runs a version reaches when that depends on the run (staged for a share
        of runs, and not for the tenant as a canary); None when it reaches all of them or none (`reaches`)."""
        stage = self.staged.get(name)
        if (name, version) in self.withheld or stage is None or stage["version"] != version:
            return None
        if in_stage(stage, name, Audience(tenant_id=tenant_id)):
            return None
        return stage.get("percent") or None


__all__ = ["SHARE_POINTS", "Audience", "Stages", "in_stage", "share_point"]
