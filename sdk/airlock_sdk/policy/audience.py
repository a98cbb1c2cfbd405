"""Which runs a version staged for a share of runs reaches: the one rule, read by the server
(`registry.stages`, as the gate resolves a run's versions) and by the SDK (`airlock_sdk.local`, deciding from
a bundle whose entry carries `share_of_runs`), so the two always pick the same version for the same run.

A run's place is the hash of its id with the skill's name and version, so it needs no write, a run never sees
two versions while it keeps its snapshot, and a run inside 10 % stays inside at 50 %.
"""

from __future__ import annotations

import hashlib

SHARE_POINTS = 10_000  # a share is compared in hundredths of a percent


def share_point(run_key: str, name: str, version: str) -> int:
    """A run's stable place in [0, 10000) for one staged version."""
    digest = hashlib.sha256(f"{run_key}\x1f{name}\x1f{version}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SHARE_POINTS


def in_share(run_key: str, name: str, version: str, percent: int | None) -> bool:
    """Whether the run `run_key` is inside the `percent` of runs a staged version reaches (no run: never)."""
    if not percent or not run_key:
        return False
    return share_point(run_key, name, version) < percent * SHARE_POINTS // 100


__all__ = ["SHARE_POINTS", "in_share", "share_point"]
