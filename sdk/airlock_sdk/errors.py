"""Exceptions the SDK raises. Results of tool calls are never exceptions: see `results`."""

from __future__ import annotations

from typing import Any


class AirlockError(Exception):
    """Base class of every exception raised by the SDK."""


class TransportError(AirlockError):
    """Airlock could not be reached, or the connection broke before a response arrived.

    `sent` tells whether the request may have reached the server: when it is False (the
    connection was refused or never opened) repeating the request is always safe.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class ControlPlaneUnavailable(TransportError):
    """Airlock answered 502/503/504 or could not be reached, after the retries that were safe."""


class OutcomeUnknown(TransportError):
    """A batch of calls was sent but no answer came back: some calls may have run.

    Do not resend blindly. `Run.status()` shows what the gate recorded for each call id;
    calls with an idempotency key can be resent safely (the gate returns the first outcome).
    """

    def __init__(self, message: str, *, call_ids: list[str]) -> None:
        super().__init__(message, sent=True)
        self.call_ids = call_ids


class APIError(AirlockError):
    """Airlock answered with an error body: {"error": {"class", "code", "message", ...}}."""

    def __init__(self, status_code: int, error: dict[str, Any]) -> None:
        self.status_code = status_code
        self.error = error
        self.error_class: str = error.get("class", "internal")
        self.code: str = error.get("code", "error")
        self.message: str = error.get("message", "")
        self.retry_after: float | None = error.get("retry_after")
        super().__init__(f"{status_code} {self.error_class}/{self.code}: {self.message}")


class AuthenticationError(APIError):
    """The API key is missing, malformed, unknown or revoked (401)."""


class PermissionDenied(APIError):
    """The key is valid but may not do this (403)."""


class NotFound(APIError):
    """No such run, call or approval for this agent (404)."""


class RateLimited(APIError):
    """Too many requests (429); `retry_after` says when to try again."""


class SnapshotVerificationError(AirlockError):
    """A snapshot is refused: its signature does not verify against the pinned public key, or one
    of the checks below fails. The last known good snapshot stays in use."""


class SnapshotAudienceError(SnapshotVerificationError):
    """The snapshot is signed for another agent or tenant (its `audience`), or names none.

    `expected` is what this client is (`key_lookup`, and `tenant` when known); `found` is the
    audience the snapshot names.
    """

    def __init__(self, message: str, *, expected: dict[str, Any], found: Any) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class SnapshotRollbackError(SnapshotVerificationError):
    """The snapshot's number is lower than the highest this client has accepted: an old snapshot
    replayed by the network or planted in the cache. `number` is the refused one, `highest` the
    highest accepted."""

    def __init__(self, message: str, *, number: int, highest: int) -> None:
        super().__init__(message)
        self.number = number
        self.highest = highest


class SnapshotKeyChanged(SnapshotVerificationError):
    """The control plane serves a public key other than the one pinned (on first use or by
    configuration); snapshots signed by it are refused until the new key is pinned deliberately.
    `trust_file` is where the key pinned on first use is kept."""

    def __init__(self, message: str, *, trust_file: str) -> None:
        super().__init__(message)
        self.trust_file = trust_file


class ApprovalTimeout(AirlockError):
    """`Run.wait` gave up before the approval was decided and its outcome delivered."""

    def __init__(self, approval_id: int, timeout: float) -> None:
        super().__init__(f"approval {approval_id} was not decided within {timeout:g} s")
        self.approval_id = approval_id


class WebhookVerificationError(AirlockError):
    """A webhook delivery failed verification: bad signature, stale timestamp or a replay."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class UnknownClientSkill(AirlockError):
    """The gate asked this process to run a client-executed skill it has no function for."""
