"""What the gate keeps in process between batches: grants, compiled policies and skill version statuses.

Each is valid for one gate generation (console.models.GateGeneration), which the database bumps on
every change to those tables and which the gate reads in the same query as the run. A batch with no
generation (a caller that did not read it, or a database without the row) reads everything live.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.utils import timezone

from policies import grants as grant_lookup
from policies.services import ActivePolicies, load_active_policies
from registry.models import SkillVersion

Generation = tuple[str, int] | None
T = TypeVar("T")
MAX_ENTRIES = 10_000  # per cache; past it the cache starts over (many tenants × roles, never unbounded)


class PerGeneration:
    """A dict that empties itself when the generation changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation: Generation = None
        self._values: dict[Any, Any] = {}

    def get(
        self, generation: Generation, key: Any, load: Callable[[], T], *, holds: Callable[[T], bool] | None = None
    ) -> T:
        """The value for `key`, loaded once per generation (again when `holds(value)` says it went stale)."""
        if generation is None:
            return load()
        with self._lock:
            if self._generation != generation or len(self._values) > MAX_ENTRIES:
                self._generation, self._values = generation, {}
            if key in self._values and (holds is None or holds(self._values[key])):
                return self._values[key]
        value = load()  # read after the generation was: at least as new as it
        with self._lock:
            if self._generation == generation:
                self._values[key] = value
        return value

    def get_many(self, generation: Generation, keys: Iterable, load: Callable[[set], dict]) -> dict:
        """Values for `keys`, loading the missing ones with one `load(missing)` call."""
        keys = set(keys)
        if generation is None:
            return load(keys)
        with self._lock:
            if self._generation != generation or len(self._values) > MAX_ENTRIES:
                self._generation, self._values = generation, {}
            found = {key: self._values[key] for key in keys if key in self._values}
        missing = keys - found.keys()
        if missing:
            loaded = load(missing)
            with self._lock:
                if self._generation == generation:
                    self._values.update(loaded)
            found.update(loaded)
        return found


_grants = PerGeneration()
_policies = PerGeneration()
_callable = PerGeneration()
_standing = PerGeneration()


def active_grants(*, tenant_id: int, agent_role: str, generation: Generation) -> list[tuple[str, list[str]]]:
    """policies.grants.active_grants, kept until the generation changes or the first grant expires."""
    grants, _ = _grants.get(
        generation,
        (tenant_id, agent_role),
        lambda: grant_lookup.active_grants_until(tenant_id=tenant_id, agent_role=agent_role),
        holds=lambda loaded: loaded[1] is None or timezone.now() < loaded[1],
    )
    return grants


def active_policies(*, generation: Generation) -> ActivePolicies:
    return _policies.get(generation, "active", load_active_policies)


def version_statuses(version_ids: Iterable[int], *, generation: Generation) -> dict[int, str]:
    """Each skill version's status now (retired after the run's snapshot was taken, deprecated...)."""
    return {pk: standing[0] for pk, standing in _standings(version_ids, generation).items()}


def version_standing(version_id: int, *, generation: Generation) -> tuple[str, datetime | None] | None:
    """(status, sunset_at) of one skill version now, or None if it is gone: what a live check needs."""
    return _standings([version_id], generation).get(version_id)


def _standings(version_ids: Iterable[int], generation: Generation) -> dict[int, tuple[str, datetime | None]]:
    return _standing.get_many(
        generation,
        version_ids,
        lambda ids: {
            pk: (status, sunset_at)
            for pk, status, sunset_at in SkillVersion.objects.filter(pk__in=ids)
            .order_by()
            .values_list("pk", "status", "sunset_at")
        },
    )


def callable_names(*, key: tuple, generation: Generation, load: Callable[[], list[str]]) -> list[str]:
    """The skills an agent could call, for `key` = (snapshot, tenant, role, grant patterns): a snapshot
    never changes, and the patterns in the key follow grants that expire within a generation."""
    return _callable.get(generation, key, load)
