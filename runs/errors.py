"""Typed call errors: each carries one class of the error table and becomes one `error` result."""

from __future__ import annotations

from typing import Any

from traces.redaction import redact, redact_text

ERROR_CLASSES = (
    "validation",
    "authorization",
    "approval_required",
    "not_found",
    "conflict",
    "rate_limited",
    "transient",
    "timeout_unknown",
    "unavailable",
    "declined",
    "expired",
    "internal",
)


EXCEPTION_MESSAGE_CHARS = 500


class CallError(Exception):
    """An error result for one call. `extra` adds contract fields (retry_after, fields, available,
    downstream_message...). `exception` is for the call's span only: the type and redacted message of an
    unexpected exception behind an internal error, never shown to the agent."""

    error_class = "internal"
    code = "internal"
    exception: dict[str, str] | None = None

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


class Conflict(CallError):
    """The downstream refused because of the state of what the call names (it exists, or changed meanwhile)."""

    error_class, code = "conflict", "conflict"


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


def internal_from(exc: BaseException) -> Internal:
    """What the agent gets for an unexpected exception: the generic message, no type and no stack; the span
    gets the exception's type and its message with secrets masked."""
    error = Internal(GENERIC_INTERNAL)
    error.exception = {
        "type": type(exc).__qualname__,
        "message": redact_text(str(exc), limit=EXCEPTION_MESSAGE_CHARS),
    }
    return error


def span_attributes(error: CallError) -> dict[str, str]:
    """What a call's span records of its error besides its class: the code, the message the agent got, what
    the downstream said, and the exception behind an internal error (OpenTelemetry's exception.* names)."""
    shown = error.as_error()
    attributes = {"airlock.error.code": error.code, "airlock.error.message": shown["message"]}
    if "downstream_message" in shown:
        attributes["airlock.error.downstream_message"] = shown["downstream_message"]
    if "downstream_code" in shown:
        attributes["airlock.error.downstream_code"] = shown["downstream_code"]
    if "fallback" in shown:  # the approved fallback offered to the model while the breaker is open
        attributes["airlock.fallback.offered"] = shown["fallback"]
    if error.exception:
        attributes["exception.type"] = error.exception["type"]
        attributes["exception.message"] = error.exception["message"]
    return attributes


def egress_refused(refusal: Exception) -> CallError:
    """The egress guard (lib/egress.py) kept a request in: nothing was sent, so nothing is retried or
    reconciled; the message names the rule, never the downstream."""
    return NotPermitted(f"Airlock may not call this skill's service: {refusal}.", code="egress_refused")
