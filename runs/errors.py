"""Typed call errors: each carries one class of the error table and becomes one `error` result."""

from __future__ import annotations

from typing import Any

from traces.redaction import redact

ERROR_CLASSES = (
    "validation",
    "authorization",
    "approval_required",
    "not_found",
    "rate_limited",
    "transient",
    "timeout_unknown",
    "unavailable",
    "declined",
    "expired",
    "internal",
)


class CallError(Exception):
    """An error result for one call. `extra` adds contract fields (retry_after, fields, available...)."""

    error_class = "internal"
    code = "internal"

    def __init__(self, message: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = {key: value for key, value in extra.items() if value is not None}

    def as_error(self) -> dict:
        """Secrets in the message or the details (a value echoed by a validation error) are masked."""
        return redact({"class": self.error_class, "code": self.code, "message": self.message, **self.extra})


class ValidationFailed(CallError):
    error_class, code = "validation", "invalid_arguments"


class NotPermitted(CallError):
    error_class, code = "authorization", "not_permitted"


class NotFound(CallError):
    error_class, code = "not_found", "unknown_skill"


class RateLimited(CallError):
    error_class, code = "rate_limited", "rate_limited"


class Transient(CallError):
    error_class, code = "transient", "transient"


class TimeoutUnknown(CallError):
    error_class, code = "timeout_unknown", "timeout_unknown"


class Unavailable(CallError):
    error_class, code = "unavailable", "unavailable"


class Declined(CallError):
    error_class, code = "declined", "declined"


class Internal(CallError):
    error_class, code = "internal", "internal"


GENERIC_INTERNAL = "The call failed with an internal error; it has been logged."


def egress_refused(refusal: Exception) -> CallError:
    """The egress guard (lib/egress.py) kept a request in: nothing was sent, so nothing is retried or
    reconciled; the message names the rule, never the downstream."""
    return NotPermitted(f"Airlock may not call this skill's service: {refusal}.", code="egress_refused")
