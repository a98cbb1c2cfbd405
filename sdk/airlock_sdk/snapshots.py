"""The signed snapshot cache: last known good registry snapshot and tool lists, kept on disk.

Every snapshot is checked against the Ed25519 public key before it is used or stored; one that
fails is refused and the last known good one stays. While the control plane is unreachable,
discovery is answered from this cache, marked `stale`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jsonschema import Draft202012Validator, FormatChecker

from airlock_sdk.canonical import canonical_json
from airlock_sdk.errors import SnapshotVerificationError, TransportError
from airlock_sdk.transport import Transport, raise_for_error

logger = logging.getLogger("airlock_sdk")

SNAPSHOT_PATH = "/api/v1/snapshots/latest"
PUBLIC_KEY_PATH = "/api/v1/snapshots/public-key"


def default_cache_dir() -> Path:
    return Path(os.environ.get("AIRLOCK_CACHE_DIR") or Path.home() / ".cache" / "airlock-sdk")


def verify_signature(body: dict, signature_b64: str, public_key_pem: str) -> None:
    """Raise SnapshotVerificationError unless `signature_b64` signs the RFC 8785 form of `body`."""
    try:
        key = serialization.load_pem_public_key(public_key_pem.encode())
    except ValueError as exc:
        raise SnapshotVerificationError(f"The served public key is unreadable: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SnapshotVerificationError("The served public key is not an Ed25519 key.")
    try:
        key.verify(base64.b64decode(signature_b64), canonical_json(body))
    except (InvalidSignature, ValueError):
        raise SnapshotVerificationError("The snapshot's signature does not verify against the public key: "
                                        "refused; the last known good snapshot stays in use.") from None


def _unwrap(data: dict) -> tuple[dict, str, int]:
    """Accept {"body"|"document"|"snapshot": {...}, "signature", "number"} as the registry serves it."""
    body = next((data[key] for key in ("body", "document", "snapshot") if isinstance(data.get(key), dict)), None)
    signature = data.get("signature")
    if body is None or not signature:
        raise SnapshotVerificationError("The snapshot response carries no body or no signature.")
    return body, signature, int(data.get("number") or body.get("number") or 0)


@dataclass
class CachedSnapshot:
    number: int
    body: dict
    signature: str
    public_key: str
    etag: str = ""
    fetched_at: float = field(default_factory=time.time)

    def skills(self) -> list[dict]:
        return list(self.body.get("skills", []))

    def find(self, name: str, version: str | None = None) -> dict | None:
        candidates = [s for s in self.skills() if s.get("name") == name]
        if version:
            return next((s for s in candidates if s.get("version") == version), None)
        active = [s for s in candidates if s.get("status", "active") == "active"]
        return max(active, key=lambda s: _semver(s.get("version", "0")), default=None)


def _semver(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("-")[0].split("."))
    except ValueError:
        return (0,)


class SnapshotCache:
    """Fetches, verifies and persists the snapshot and the agent's tool lists for one base URL + key."""

    def __init__(self, transport: Transport, *, directory: Path | None = None, public_key_pem: str | None = None,
                 namespace: str = "") -> None:
        self.transport = transport
        self.pinned_key = public_key_pem
        self.directory = Path(directory) if directory else default_cache_dir()
        digest = hashlib.sha256(f"{transport.base_url}|{namespace}".encode()).hexdigest()[:16]
        self.path = self.directory / f"snapshot-{digest}.json"
        self.tools_path = self.directory / f"tools-{digest}.json"
        self.snapshot: CachedSnapshot | None = None
        self.stale = False
        self._validators: dict[tuple[str, str], Draft202012Validator] = {}
        self._load_from_disk()

    # disk -----------------------------------------------------------------------------------
    def _load_from_disk(self) -> None:
        try:
            data = json.loads(self.path.read_text())
            cached = CachedSnapshot(**data)
            verify_signature(cached.body, cached.signature, self.pinned_key or cached.public_key)
        except FileNotFoundError:
            return
        except (ValueError, TypeError, SnapshotVerificationError) as exc:
            logger.warning("Ignoring the cached snapshot at %s: %s", self.path, exc)
            return
        self.snapshot = cached

    def _write(self, path: Path, data: Any) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)

    # network --------------------------------------------------------------------------------
    def public_key(self) -> str:
        if self.pinned_key:
            return self.pinned_key
        data = self.transport.json("GET", PUBLIC_KEY_PATH, safe=True)
        if isinstance(data, dict):
            data = data.get("public_key") or data.get("public_key_pem") or data.get("pem")
        pem = data
        if not pem:
            raise SnapshotVerificationError("The control plane served no public key.")
        return pem

    def refresh(self) -> CachedSnapshot:
        """Fetch the latest snapshot (conditional GET), verify it, store it; on an outage keep the cached one."""
        headers = {"If-None-Match": self.snapshot.etag} if self.snapshot and self.snapshot.etag else {}
        try:
            response = self.transport.request("GET", SNAPSHOT_PATH, safe=True, headers=headers)
            if response.status_code == 304 and self.snapshot:
                self.stale = False
                return self.snapshot
            raise_for_error(response, expect=(200,))
            body, signature, number = _unwrap(response.json())
            public_key = self.public_key()
        except TransportError:
            if self.snapshot is None:
                raise
            self.stale = True
            logger.warning("Airlock is unreachable; using cached snapshot %s.", self.snapshot.number)
            return self.snapshot
        verify_signature(body, signature, public_key)
        self.snapshot = CachedSnapshot(number=number, body=body, signature=signature, public_key=public_key,
                                       etag=response.headers.get("ETag", ""))
        self.stale = False
        self._validators.clear()
        self._write(self.path, self.snapshot.__dict__)
        return self.snapshot

    # tool lists -------------------------------------------------------------------------------
    def remember_tools(self, key: str, tools: list[dict]) -> None:
        try:
            stored = json.loads(self.tools_path.read_text())
        except (FileNotFoundError, ValueError):
            stored = {}
        stored[key] = {"tools": tools, "fetched_at": time.time()}
        self._write(self.tools_path, stored)

    def cached_tools(self, key: str) -> tuple[list[dict], float] | None:
        try:
            entry = json.loads(self.tools_path.read_text())[key]
        except (FileNotFoundError, ValueError, KeyError):
            return None
        return entry["tools"], entry["fetched_at"]

    # local validation -----------------------------------------------------------------------
    def validate(self, name: str, arguments: Any, version: str | None = None) -> list[dict] | None:
        """Errors for `arguments` against the cached input schema; None when the skill is not cached."""
        if self.snapshot is None:
            return None
        entry = self.snapshot.find(name, version)
        if entry is None:
            return None
        schema = (entry.get("manifest") or {}).get("input_schema")
        if not isinstance(schema, dict):
            return None
        key = (name, entry.get("version", ""))
        validator = self._validators.get(key)
        if validator is None:
            validator = self._validators[key] = Draft202012Validator(schema, format_checker=FormatChecker())
        return [{"path": "/" + "/".join(str(p) for p in error.absolute_path), "message": error.message}
                for error in validator.iter_errors(arguments)] or []
