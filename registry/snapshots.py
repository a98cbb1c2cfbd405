"""Signed, immutable registry snapshots: what runtimes load to resolve and check tool calls.

A snapshot document is built from every function in SNAPSHOT_SECTIONS (each returning
`(key, json_value)`), canonicalised with RFC 8785, hashed (SHA-256) and signed
(Ed25519). Runtimes pin a snapshot number and resolve calls through `load_snapshot(number)`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from lib import signing
from lib.canonical import canonical_json
from registry.models import SkillVersion, Snapshot, VersionStatus
from registry.stages import Audience, Stages

SNAPSHOT_FORMAT = "airlock.snapshot/1"


# An arbitrary, fixed key for pg_advisory_xact_lock: serialises snapshot numbering on PostgreSQL.
_ADVISORY_LOCK_KEY = 0x41524C4B  # "ARLK"


def skill_entry(version: SkillVersion) -> dict:
    skill = version.skill
    return {
        "skill_version_id": version.pk,
        "skill_pk": skill.pk,
        "skill_id": skill.skill_id,
        "name": skill.name,
        "namespace": skill.namespace,
        "owner_team": skill.owner_team.slug,
        "version": version.version,
        "status": version.status,
        "effect": version.effect,
        "data_classification": version.data_classification,
        "manifest": version.effective_manifest(),
        "replacement_name": version.replacement.name if version.replacement_id else None,
        "deprecated_at": version.deprecated_at.isoformat() if version.deprecated_at else None,
        "sunset_at": version.sunset_at.isoformat() if version.sunset_at else None,
    }


def skills_section() -> tuple[str, list[dict]]:
    """Every active and deprecated version: deprecated ones stay callable by exact version until sunset."""
    versions = (
        SkillVersion.objects.filter(status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED])
        .select_related("skill__owner_team", "replacement")
        .order_by("skill__name", "major", "minor", "patch")
    )
    return "skills", [skill_entry(version) for version in versions]


# f() -> (key, json_value), in document order. Layers above append theirs in AppConfig.ready()
# (policies.apps: policies.snapshot.grants_section and policies_section).
SNAPSHOT_SECTIONS: list[Callable[[], tuple[str, Any]]] = [skills_section]


def build_document(*, number: int, reason: str, created_at: datetime) -> dict:
    document: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "number": number,
        "reason": reason,
        "created_at": created_at.isoformat(),
    }
    for section in SNAPSHOT_SECTIONS:
        key, value = section()
        document[key] = value
    return document


def _next_number() -> int:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_LOCK_KEY])
    latest = Snapshot.objects.select_for_update().order_by("-number").values_list("number", flat=True).first()
    return (latest or 0) + 1


def publish_snapshot(*, reason: str) -> Snapshot:
    """Build, sign and store the next snapshot. Call it after your own writes, in the same transaction.

    On PostgreSQL a transaction-scoped advisory lock orders publishers, so numbers follow commit
    order; SQLite runs write transactions one at a time (IMMEDIATE). A unique-number clash (another
    process without the lock) is retried.
    """
    for attempt in range(5):
        try:
            with transaction.atomic():
                number = _next_number()
                created_at = timezone.now()
                body = build_document(number=number, reason=reason[:200], created_at=created_at)
                payload = canonical_json(body)  # once: RFC 8785 in pure Python is the costly step
                return Snapshot.objects.create(
                    number=number,
                    body=body,
                    canonical_sha256=hashlib.sha256(payload).hexdigest(),
                    signature=signing.sign(payload),
                    key_id=signing.key_id(),
                    reason=reason[:200],
                    created_at=created_at,
                )
        except IntegrityError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def latest_index() -> SnapshotIndex:
    """The index of the newest snapshot: one small query; the body is read only on a cache miss."""
    latest = Snapshot.objects.order_by("-number").values_list("number", "canonical_sha256").first()
    if latest is None:
        return index_for(latest_snapshot())
    with _cache_lock:
        index = _cache.get(latest)
        if index is not None:
            return index
    return index_for(Snapshot.objects.get(number=latest[0]))


def latest_snapshot(*, with_body: bool = True) -> Snapshot:
    """The newest snapshot, publishing snapshot 1 when the registry has never published one. Without its
    body (megabytes for a large catalog) when the caller only pins it: `index_for` reads it on a miss."""
    newest = Snapshot.objects.order_by("-number")
    snapshot = (newest if with_body else newest.defer("body")).first()
    if snapshot is None:
        with transaction.atomic():
            snapshot = Snapshot.objects.order_by("-number").first() or publish_snapshot(reason="initial snapshot")
    return snapshot


def verify_snapshot(body: dict | bytes | str, signature: str, public_key_pem: str | None = None) -> bool:
    """True when `signature` is a valid Ed25519 signature of the canonical form of `body`."""
    import json

    if isinstance(body, bytes | str):
        body = json.loads(body)
    return signing.verify(canonical_json(body), signature, public_key_pem)


@dataclass(frozen=True)
class ResolvedSkill:
    """One skill version as a runtime sees it in a pinned snapshot."""

    skill_version_id: int
    skill_id: str
    name: str
    namespace: str
    version: str
    status: str
    effect: str
    data_classification: str
    manifest: dict
    replacement_name: str | None
    deprecated: bool
    skill_pk: int | None = None
    owner_team: str = ""
    deprecated_at: str | None = None
    sunset_at: str | None = None
    builtin: bool = False  # answered by Airlock itself (runs/meta_tools.py): no version row, no grant needed

    @property
    def replacement(self) -> str | None:
        return self.replacement_name

    @classmethod
    def from_entry(cls, entry: dict) -> ResolvedSkill:
        return cls(
            skill_version_id=entry["skill_version_id"],
            skill_id=entry["skill_id"],
            name=entry["name"],
            namespace=entry["namespace"],
            version=entry["version"],
            status=entry["status"],
            effect=entry["effect"],
            data_classification=entry["data_classification"],
            manifest=entry["manifest"],
            replacement_name=entry.get("replacement_name"),
            deprecated=entry["status"] == VersionStatus.DEPRECATED,
            skill_pk=entry.get("skill_pk"),
            owner_team=entry.get("owner_team", ""),
            deprecated_at=entry.get("deprecated_at"),
            sunset_at=entry.get("sunset_at"),
        )


def _semver_key(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("-")[0].split("."))
    except ValueError:
        return (0, 0, 0)


@dataclass
class SnapshotIndex:
    """A loaded snapshot, indexed by skill name. Treat it as read-only: it is shared across requests."""

    number: int
    sha256: str
    body: dict
    _by_name: dict[str, list[dict]] = field(default_factory=dict, repr=False)
    _stages: Stages = field(default_factory=lambda: Stages.of([]), repr=False)

    @classmethod
    def from_body(cls, *, number: int, sha256: str, body: dict) -> SnapshotIndex:
        by_name: dict[str, list[dict]] = {}
        for entry in body.get("skills", []):
            by_name.setdefault(entry["name"], []).append(entry)
        for entries in by_name.values():
            entries.sort(key=lambda entry: _semver_key(entry["version"]), reverse=True)
        return cls(
            number=number, sha256=sha256, body=body, _by_name=by_name, _stages=Stages.of(body.get("rollouts", []))
        )

    @property
    def skills(self) -> list[dict]:
        return self.body.get("skills", [])

    @property
    def grants(self) -> Any:
        return self.body.get("grants", [])

    @property
    def policies(self) -> Any:
        return self.body.get("policies", [])

    def names(self) -> list[str]:
        return list(self._by_name)

    @staticmethod
    def _callable(entry: dict, now: datetime) -> bool:
        if entry["status"] == VersionStatus.ACTIVE:
            return True
        sunset = entry.get("sunset_at")
        return entry["status"] == VersionStatus.DEPRECATED and (sunset is None or datetime.fromisoformat(sunset) > now)

    def resolve(
        self, name: str, version: str | None = None, *, now: datetime | None = None, audience: Audience | None = None
    ) -> ResolvedSkill | None:
        """The exact version when given (deprecated ones until sunset); else the newest active one.

        A skill whose versions are all deprecated still resolves by name to its newest version
        until sunset, flagged `deprecated`, so callers learn the replacement instead of "unknown".
        Retired and unknown skills resolve to None. A staged version counts only for the `audience` it
        reaches (canary tenants, its share of runs) and a rolled-back one for nobody (registry.stages).
        """
        now = now or timezone.now()
        entries = [e for e in self._by_name.get(name, []) if self._stages.reaches(name, e["version"], audience)]
        if version is not None:
            for entry in entries:
                if entry["version"] == version and self._callable(entry, now):
                    return ResolvedSkill.from_entry(entry)
            return None
        for entry in entries:
            if entry["status"] == VersionStatus.ACTIVE:
                return ResolvedSkill.from_entry(entry)
        for entry in entries:
            if self._callable(entry, now):
                return ResolvedSkill.from_entry(entry)
        return None

    def current_entries(self, audience: Audience | None = None) -> list[dict]:
        """The newest active version of each skill that reaches `audience`: what discovery may show
        (deprecated are hidden). Without a run in the audience a share-of-runs stage shows its baseline."""
        current = []
        for name, entries in self._by_name.items():
            for entry in entries:
                if entry["status"] == VersionStatus.ACTIVE and self._stages.reaches(name, entry["version"], audience):
                    current.append(entry)
                    break
        return current

    def rollouts(self) -> list[dict]:
        return self.body.get("rollouts", [])

    @property
    def stages(self) -> Stages:
        """The snapshot's stages: which caller each staged version reaches (registry.stages)."""
        return self._stages

    def entry(self, name: str, version: str) -> dict | None:
        """The snapshot's entry for this exact version, whoever it reaches (a record of what was called, not a
        resolution: `resolve` is what may be called)."""
        return next((e for e in self._by_name.get(name, []) if e["version"] == version), None)


_CACHE_SIZE = 16
_cache: OrderedDict[tuple[int, str], SnapshotIndex] = OrderedDict()
_cache_lock = threading.Lock()


def index_for(snapshot: Snapshot) -> SnapshotIndex:
    """The index of a Snapshot row already in hand (no query when cached)."""
    key = (snapshot.number, snapshot.canonical_sha256)
    with _cache_lock:
        index = _cache.get(key)
        if index is not None:
            _cache.move_to_end(key)
            return index
    index = SnapshotIndex.from_body(number=snapshot.number, sha256=snapshot.canonical_sha256, body=snapshot.body)
    with _cache_lock:
        _cache[key] = index
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def load_snapshot(number: int) -> SnapshotIndex:
    """The index of snapshot `number`, cached per process.

    The cache key includes the snapshot's hash (one indexed lookup), so a database that was reset
    (tests, a restored backup) never serves another snapshot under a reused number.
    """
    sha256 = Snapshot.objects.filter(number=number).values_list("canonical_sha256", flat=True).first()
    if sha256 is None:
        raise Snapshot.DoesNotExist(f"No snapshot number {number}.")
    with _cache_lock:
        index = _cache.get((number, sha256))
        if index is not None:
            _cache.move_to_end((number, sha256))
            return index
    return index_for(Snapshot.objects.get(number=number))


def clear_snapshot_cache() -> None:
    with _cache_lock:
        _cache.clear()


__all__ = [
    "SNAPSHOT_SECTIONS",
    "latest_index",
    "ResolvedSkill",
    "SnapshotIndex",
    "clear_snapshot_cache",
    "index_for",
    "latest_snapshot",
    "load_snapshot",
    "publish_snapshot",
    "verify_snapshot",
]
