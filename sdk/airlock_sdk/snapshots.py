"""The signed snapshot cache: last known good registry snapshot and tool lists, kept on disk.

A snapshot is used or stored only when (1) its Ed25519 signature verifies against the pinned
public key, (2) its signed `audience` is this agent (key lookup, and tenant), and (3) its number
is not lower than the highest this client has accepted. The key is pinned by configuration
(`public_key_pem=` or `AIRLOCK_PUBLIC_KEY`) or on first use, and kept with the highest number in
a trust file outside the cache (`airlock_sdk.trust`); it is never read from the cache file. A
snapshot that fails is refused, logged and kept in `SnapshotCache.refusals`, and the last known
good one stays. While the control plane is unreachable, discovery is answered from this cache,
marked `stale`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Self

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jsonschema import Draft202012Validator, FormatChecker

from airlock_sdk.canonical import canonical_json
from airlock_sdk.errors import (
    SnapshotAudienceError,
    SnapshotKeyChanged,
    SnapshotRollbackError,
    SnapshotVerificationError,
    TransportError,
)
from airlock_sdk.transport import Transport, raise_for_error
from airlock_sdk.trust import TENANT_ENV, TrustStore, configured_public_key, default_trust_dir

logger = logging.getLogger("airlock_sdk")

SNAPSHOT_PATH = "/api/v1/snapshots/latest"
PUBLIC_KEY_PATH = "/api/v1/snapshots/public-key"
MAX_REFUSALS = 20


def default_cache_dir() -> Path:
    return Path(os.environ.get("AIRLOCK_CACHE_DIR") or Path.home() / ".cache" / "airlock-sdk")


def verify_signature(body: dict, signature_b64: str, public_key_pem: str, *, kind: str = "snapshot") -> None:
    """Raise SnapshotVerificationError unless `signature_b64` signs the RFC 8785 form of `body`."""
    try:
        key = serialization.load_pem_public_key(public_key_pem.encode())
    except ValueError as exc:
        raise SnapshotVerificationError(f"The public key is unreadable: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SnapshotVerificationError("The public key is not an Ed25519 key.")
    try:
        key.verify(base64.b64decode(signature_b64), canonical_json(body))
    except (InvalidSignature, ValueError):
        raise SnapshotVerificationError(
            f"The {kind}'s signature does not verify against the pinned public key: "
            f"refused; the last known good {kind} stays in use."
        ) from None


def _unwrap(data: dict) -> tuple[dict, str]:
    """Accept {"body"|"document"|"snapshot": {...}, "signature"} as the registry serves it."""
    body = next((data[key] for key in ("body", "document", "snapshot") if isinstance(data.get(key), dict)), None)
    signature = data.get("signature")
    if body is None or not signature:
        raise SnapshotVerificationError("The snapshot response carries no body or no signature.")
    return body, signature


def _number(body: dict, kind: str = "snapshot") -> int:
    """The signed number (never the unsigned envelope's)."""
    try:
        return int(body["number"])
    except (KeyError, TypeError, ValueError):
        raise SnapshotVerificationError(f"The signed {kind} body carries no number.") from None


def check_signed(
    body: dict,
    signature: str,
    public_key: str,
    *,
    key_lookup: str,
    tenant: str | None,
    highest: int,
    trust_path: Path,
    kind: str = "snapshot",
) -> int:
    """The checks every signed document from the control plane passes (snapshots and decision bundles):
    the signature against the pinned key, the audience (this agent's key lookup, and its tenant when
    known), then a number not lower than the highest accepted. Returns the number; raises a typed refusal."""
    verify_signature(body, signature, public_key, kind=kind)
    expected = {"key_lookup": key_lookup}
    if tenant:
        expected["tenant"] = tenant
    audience = body.get("audience")
    if (
        not isinstance(audience, dict)
        or not key_lookup
        or any(audience.get(name) != value for name, value in expected.items())
    ):
        raise SnapshotAudienceError(
            f"The {kind} is signed for {audience!r}, not for this agent {expected!r}: refused.",
            expected=expected,
            found=audience,
        )
    number = _number(body, kind)
    if number < highest:
        raise SnapshotRollbackError(
            f"{kind.capitalize()} {number} is older than {kind} {highest}, already accepted: refused as a rollback. "
            f"If the control plane's database was really restored, remove {trust_path} deliberately.",
            number=number,
            highest=highest,
        )
    return number


@dataclass
class CachedSigned:
    """A signed document as the cache keeps it on disk: a snapshot, or a decision bundle (airlock_sdk.bundles)."""

    number: int
    body: dict
    signature: str
    etag: str = ""
    fetched_at: float = field(default_factory=time.time)

    @classmethod
    def from_file(cls, data: dict) -> Self:
        """Only the fields above: anything else in the file (such as a `public_key`) is ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


class CachedSnapshot(CachedSigned):
    pass

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
    """Fetches, checks and persists the snapshot and the agent's tool lists for one base URL + key.

    `key_lookup` is the agent's own (from its key); `tenant` (or `AIRLOCK_TENANT`) is optional:
    when unset, the tenant named by the first accepted snapshot is remembered and required after.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        directory: Path | None = None,
        public_key_pem: str | None = None,
        namespace: str = "",
        key_lookup: str = "",
        tenant: str | None = None,
        trust_dir: Path | None = None,
    ) -> None:
        self.transport = transport
        self.pinned_key = configured_public_key(public_key_pem)
        self.key_lookup = key_lookup
        self.tenant = tenant or os.environ.get(TENANT_ENV) or None
        self.directory = Path(directory) if directory else default_cache_dir()
        digest = hashlib.sha256(f"{transport.base_url}|{namespace}".encode()).hexdigest()[:16]
        self.path = self.directory / f"snapshot-{digest}.json"
        self.tools_path = self.directory / f"tools-{digest}.json"
        trust_directory = Path(trust_dir) if trust_dir else default_trust_dir()
        if trust_directory.resolve() == self.directory.resolve():
            raise ValueError("The trust directory must not be the cache directory (see airlock_sdk.trust).")
        self.trust = TrustStore(trust_directory / f"trust-{digest}.json")
        self.snapshot: CachedSnapshot | None = None
        self.stale = False
        self.refusals: list[SnapshotVerificationError] = []
        self._validators: dict[tuple[str, str], Draft202012Validator] = {}
        self._load_from_disk()

    # checks ----------------------------------------------------------------------------------
    def trusted_key(self) -> str | None:
        """The key snapshots must verify against: configured, else pinned on first use, else None yet."""
        return self.pinned_key or self.trust.state.public_key_pem

    def _refuse(self, exc: SnapshotVerificationError, where: str) -> SnapshotVerificationError:
        logger.warning("Refused a snapshot %s: %s", where, exc)
        self.refusals = [*self.refusals, exc][-MAX_REFUSALS:]
        return exc

    def _check(self, body: dict, signature: str, public_key: str) -> int:
        """Signature, audience, then monotonic number; returns the number. Raises a typed refusal."""
        return check_signed(
            body,
            signature,
            public_key,
            key_lookup=self.key_lookup,
            tenant=self.tenant or self.trust.state.audience.get("tenant"),
            highest=self.trust.state.highest_number,
            trust_path=self.trust.path,
        )

    def _accept(self, number: int, body: dict, public_key: str) -> None:
        state = self.trust.state
        changed = number > state.highest_number or (not self.pinned_key and state.public_key_pem != public_key)
        audience = {"tenant": body["audience"].get("tenant"), "key_lookup": self.key_lookup}
        if changed or state.audience != audience:
            state.highest_number = max(state.highest_number, number)
            state.audience = audience
            if not self.pinned_key:
                state.public_key_pem = public_key  # first use: later keys never replace it
            self.trust.save()

    # disk -----------------------------------------------------------------------------------
    def _load_from_disk(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (ValueError, OSError) as exc:
            logger.warning("Ignoring the cached snapshot at %s: %s", self.path, exc)
            return
        key = self.trusted_key()
        if self.trust.error or key is None:
            logger.warning(
                "Ignoring the cached snapshot at %s: %s",
                self.path,
                self.trust.error or "no public key is pinned yet, so nothing on disk can be verified",
            )
            return
        try:
            cached = CachedSnapshot.from_file(data)
            number = self._check(cached.body, cached.signature, key)
            if number != cached.number:
                raise SnapshotVerificationError(f"The cache file says snapshot {cached.number}; it is {number}.")
        except (ValueError, TypeError) as exc:
            logger.warning("Ignoring the cached snapshot at %s: %s", self.path, exc)
            return
        except SnapshotVerificationError as exc:
            self._refuse(exc, f"in the cache file {self.path}")
            return
        self._accept(number, cached.body, key)
        self.snapshot = cached

    def _write(self, path: Path, data: Any) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)

    # network --------------------------------------------------------------------------------
    def served_public_key(self) -> str:
        data = self.transport.json("GET", PUBLIC_KEY_PATH, safe=True)
        if isinstance(data, dict):
            data = data.get("public_key") or data.get("public_key_pem") or data.get("pem")
        if not data or not isinstance(data, str):
            raise SnapshotVerificationError("The control plane served no public key.")
        return data

    def _key_for_refresh(self) -> str:
        """The pinned key; on first use (nothing pinned yet), the one the control plane serves."""
        return self.trusted_key() or self.served_public_key()

    def _explain_bad_signature(self, exc: SnapshotVerificationError, key: str) -> SnapshotVerificationError:
        """Say so plainly when the served key differs from the pinned one (rotation or impostor)."""
        try:
            served = self.served_public_key()
        except (TransportError, SnapshotVerificationError):
            return exc
        if served.strip() == key.strip():
            return exc
        how = "by configuration" if self.pinned_key else f"on first use in {self.trust.path}"
        return SnapshotKeyChanged(
            f"The control plane now serves a public key other than the one pinned {how}; its snapshots are refused. "
            "If the signing key was really rotated, pin the new key (public_key_pem= or AIRLOCK_PUBLIC_KEY) or "
            "remove the trust file deliberately.",
            trust_file=str(self.trust.path),
        )

    def refresh(self) -> CachedSnapshot:
        """Fetch the latest snapshot (conditional GET), check it, store it; on an outage keep the cached one."""
        self.trust.check_readable()
        headers = {"If-None-Match": self.snapshot.etag} if self.snapshot and self.snapshot.etag else {}
        try:
            response = self.transport.request("GET", SNAPSHOT_PATH, safe=True, headers=headers)
            if response.status_code == 304 and self.snapshot:
                self.stale = False
                return self.snapshot
            raise_for_error(response, expect=(200,))
            body, signature = _unwrap(response.json())
            public_key = self._key_for_refresh()
        except TransportError:
            if self.snapshot is None:
                raise
            self.stale = True
            logger.warning("Airlock is unreachable; using cached snapshot %s.", self.snapshot.number)
            return self.snapshot
        try:
            number = self._check(body, signature, public_key)
        except (SnapshotAudienceError, SnapshotRollbackError) as exc:
            raise self._refuse(exc, "from the control plane") from None
        except SnapshotVerificationError as exc:
            raise self._refuse(self._explain_bad_signature(exc, public_key), "from the control plane") from None
        self._accept(number, body, public_key)
        self.snapshot = CachedSnapshot(
            number=number, body=body, signature=signature, etag=response.headers.get("ETag", "")
        )
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
        return [
            {"path": "/" + "/".join(str(p) for p in error.absolute_path), "message": error.message}
            for error in validator.iter_errors(arguments)
        ] or []
