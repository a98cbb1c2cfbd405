"""The signed decision bundle: what this agent may decide by itself while Airlock cannot be reached.

The server signs one bundle per agent (`GET /api/v1/decision-bundle`) with the key that signs
snapshots: the agent's callable skills, its tenant's grants for its role, the published policies
that apply (their rules, compiled here by `airlock_sdk.policy`), its rate limit, whether its role may
decide locally, an audience, a number that only grows, and `valid_until`. It is checked exactly as a
snapshot is (`snapshots.check_signed`: pinned key, audience, no rollback; its highest number kept in
its own trust file), and the last good one is kept on disk. Past `valid_until` it decides nothing.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

from airlock_sdk.errors import (
    APIError,
    SnapshotAudienceError,
    SnapshotRollbackError,
    SnapshotVerificationError,
    TransportError,
)
from airlock_sdk.snapshots import CachedSigned, SnapshotCache, check_signed
from airlock_sdk.transport import raise_for_error
from airlock_sdk.trust import TrustStore

logger = logging.getLogger("airlock_sdk")

BUNDLE_PATH = "/api/v1/decision-bundle"
RETRY_REFRESH_SECONDS = 5.0  # after a failed refresh, local decisions do not wait on the network again before this


class CachedBundle(CachedSigned):
    pass

    @property
    def valid_until(self) -> datetime:
        return datetime.fromisoformat(self.body["valid_until"])

    @property
    def issued_at(self) -> datetime:
        return datetime.fromisoformat(self.body["issued_at"])

    def expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.valid_until

    def due_for_refresh(self, now: datetime | None = None) -> bool:
        """Half its validity has passed: fetch a fresh one while this one still holds."""
        now = now or datetime.now(UTC)
        return now >= self.issued_at + (self.valid_until - self.issued_at) / 2


class BundleCache:
    """Fetches, checks and keeps the decision bundle for the agent of `snapshots` (same key, same audience)."""

    def __init__(self, snapshots: SnapshotCache) -> None:
        self.snapshots = snapshots
        self.transport = snapshots.transport
        digest = snapshots.path.name.removeprefix("snapshot-").removesuffix(".json")
        self.path = snapshots.directory / f"bundle-{digest}.json"
        self.trust = TrustStore(snapshots.trust.path.with_name(f"trust-bundle-{digest}.json"))
        self.bundle: CachedBundle | None = None
        self.refusals: list[SnapshotVerificationError] = []
        self.last_failure: float = 0.0
        self.revoked: APIError | None = None  # the server's 401/403 for this agent's key, when it said so
        self._load_from_disk()

    def _check(self, body: dict, signature: str, public_key: str) -> int:
        snapshots = self.snapshots
        return check_signed(
            body,
            signature,
            public_key,
            key_lookup=snapshots.key_lookup,
            tenant=snapshots.tenant or snapshots.trust.state.audience.get("tenant"),
            highest=self.trust.state.highest_number,
            trust_path=self.trust.path,
            kind="decision bundle",
        )

    def _refuse(self, exc: SnapshotVerificationError) -> SnapshotVerificationError:
        logger.warning("Refused a decision bundle: %s", exc)
        self.refusals = [*self.refusals, exc][-20:]
        return exc

    def _accept(self, bundle: CachedBundle) -> None:
        if bundle.number > self.trust.state.highest_number:
            self.trust.state.highest_number = bundle.number
            self.trust.save()
        self.bundle = bundle

    def _load_from_disk(self) -> None:
        try:
            cached = CachedBundle.from_file(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return
        except (ValueError, TypeError, OSError) as exc:
            logger.warning("Ignoring the cached decision bundle at %s: %s", self.path, exc)
            return
        key = self.snapshots.trusted_key()
        if key is None or self.trust.error:
            return
        try:
            if self._check(cached.body, cached.signature, key) != cached.number:
                raise SnapshotVerificationError("The cache file's number is not the signed one.")
        except SnapshotVerificationError as exc:
            self._refuse(exc)
            return
        self._accept(cached)

    def refresh(self) -> CachedBundle | None:
        """Fetch the bundle (conditional GET), check it and keep it; on an outage keep the last good one.
        A refused bundle raises its typed refusal and leaves the last good one in place."""
        self.trust.check_readable()
        if self.snapshots.trusted_key() is None:
            self.snapshots.refresh()  # pins the key on first use, as snapshots do
        headers = {"If-None-Match": self.bundle.etag} if self.bundle and self.bundle.etag else {}
        try:
            response = self.transport.request("GET", BUNDLE_PATH, safe=True, headers=headers)
            if response.status_code == 304 and self.bundle:
                self.last_failure = 0.0
                return self.bundle
            raise_for_error(response, expect=(200,))
            data = response.json()
        except TransportError:
            self.last_failure = time.monotonic()
            return self.bundle
        except APIError as exc:
            self.last_failure = time.monotonic()
            if exc.status_code in (401, 403):
                self.revoked = exc  # no new bundle; the last one still expires at its valid_until
            raise
        body, signature = data.get("bundle"), data.get("signature")
        if not isinstance(body, dict) or not isinstance(signature, str):
            raise self._refuse(SnapshotVerificationError("The decision bundle response has no bundle or signature."))
        key = self.snapshots._key_for_refresh()
        try:
            number = self._check(body, signature, key)
        except (SnapshotAudienceError, SnapshotRollbackError, SnapshotVerificationError) as exc:
            raise self._refuse(exc) from None
        bundle = CachedBundle(number=number, body=body, signature=signature, etag=response.headers.get("ETag", ""))
        self._accept(bundle)
        self.revoked = None
        self.last_failure = 0.0
        self.snapshots._write(self.path, bundle.__dict__)
        return bundle

    def current(self) -> CachedBundle | None:
        """The bundle to decide with: refreshed first when half its validity has passed (at most every few
        seconds while Airlock is down, so an outage costs local decisions no network wait)."""
        due = self.bundle is None or self.bundle.due_for_refresh()
        if due and time.monotonic() - self.last_failure >= RETRY_REFRESH_SECONDS:
            try:
                self.refresh()
            except (SnapshotVerificationError, APIError, TransportError) as exc:
                self.last_failure = time.monotonic()
                logger.warning("Could not refresh the decision bundle: %s", exc)
        return self.bundle


__all__ = ["BUNDLE_PATH", "BundleCache", "CachedBundle"]
