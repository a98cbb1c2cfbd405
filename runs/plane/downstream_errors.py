"""What a skill's service said when it refused a call, turned into an error the model can act on.

Written once for every adapter: the HTTP adapter's 4xx answers and the MCP adapter's tool errors
(`isError` results and JSON-RPC errors) go through `refusal(...)`, so a 422 and an MCP tool saying
"invalid quantity" reach the model the same way: the same class, the same code, and the service's
own words under `downstream_message`, with active content removed, secrets masked and at most
`MESSAGE_CHARS` characters, fenced (`airlock_sdk.fencing.for_model`) like any untrusted tool content,
so that a service cannot give the model instructions through its error either. The class comes from the
HTTP status, the JSON-RPC code, or else from what the message says (`PHRASES`); what cannot be classed
stays `unavailable`.

A service's own error code (its JSON body's `code`, `error_code` or `error.code`) travels as
`downstream_code`; `with_declared_meaning` adds what the manifest's `errors` say of it (`meaning`,
`retryable`), or names the code as undeclared for the span, the metrics and the owners' alert.
"""

from __future__ import annotations

import json
import re
from typing import Any

from airlock_sdk.fencing import clean_text, for_model

from runs.errors import CallError, Conflict, NotFound, NotPermitted, RateLimited, Unavailable, ValidationFailed
from traces.redaction import redact_text

MESSAGE_CHARS = 1_000
TRUNCATED = " …[truncated]"
# Masking runs on at most this much of a body: far more than is kept, so that nothing a mask shortens
# pulls an unmasked fragment into the kept part, and little enough that a huge body costs nothing.
SCANNED_CHARS = 16 * MESSAGE_CHARS
MESSAGE_KEYS = ("message", "detail", "error_description", "error", "errors", "title", "msg")
MAX_DEPTH = 4
CODE_KEYS = ("code", "error_code")
CODE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")  # as the manifest schema's errors[].code

# Each class of refusal: the same error type and code whichever adapter met it.
REFUSALS: dict[str, tuple[type[CallError], str]] = {
    "validation": (ValidationFailed, "downstream_rejected"),
    "not_found": (NotFound, "downstream_not_found"),
    "conflict": (Conflict, "downstream_conflict"),
    "authorization": (NotPermitted, "downstream_forbidden"),
    "rate_limited": (RateLimited, "downstream_rate_limited"),
    "unavailable": (Unavailable, "downstream_error"),
}
HTTP_STATUS_CLASSES = {
    400: "validation",
    413: "validation",
    422: "validation",
    401: "authorization",
    403: "authorization",
    404: "not_found",
    410: "not_found",
    409: "conflict",
    412: "conflict",
}
# The server's own fault, as a 5xx is: its message may hold internals and is not passed on.
JSONRPC_INTERNAL_ERROR = -32603
# JSON-RPC's own codes, and MCP's resource-not-found.
JSONRPC_CLASSES = {
    -32700: "validation",
    -32600: "validation",
    -32602: "validation",
    -32601: "unavailable",
    JSONRPC_INTERNAL_ERROR: "unavailable",
    -32002: "not_found",
}
# The tool the manifest names is missing on the server: nothing the model can change, whatever the code says.
UNKNOWN_TOOL = re.compile(r"\bunknown tool\b", re.IGNORECASE)
# First match wins, in this order: "order 7 not found" stays not_found even if the message also says "invalid".
PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (error_class, re.compile(pattern, re.IGNORECASE))
    for error_class, pattern in (
        ("not_found", r"\bnot found\b|\bno such\b|\bdoes(?: not|n't) exist\b|\bno longer exists\b"),
        ("conflict", r"\bconflict|\balready exists?\b|\bduplicate\b|\bversion mismatch\b|\bmodified since\b"),
        (
            "authorization",
            r"\bpermission\b|\bforbidden\b|\bnot (?:allowed|permitted|authori[sz]ed)\b|\bunauthori[sz]ed\b"
            r"|\baccess denied\b",
        ),
        (
            "validation",
            r"\binvalid\b|\bvalidation\b|\bis required\b|\bmust be\b|\bmissing (?:argument|field|parameter)\b"
            r"|\bout of range\b|\bmalformed\b|\bexpected\b",
        ),
    )
)


def class_of_message(text: str, *, jsonrpc_code: int | None = None) -> str:
    """The error class a tool's error says it is (by its JSON-RPC code when it has a telling one)."""
    if UNKNOWN_TOOL.search(text):
        return "unavailable"
    if jsonrpc_code in JSONRPC_CLASSES:
        return JSONRPC_CLASSES[jsonrpc_code]
    for error_class, pattern in PHRASES:
        if pattern.search(text):
            return error_class
    return "unavailable"


def bounded(text: str) -> str:
    """The service's words as the model may read them: active content removed, secrets masked, bounded."""
    cleaned, _ = clean_text(" ".join(text[:SCANNED_CHARS].split()))
    masked = redact_text(cleaned)
    return masked if len(masked) <= MESSAGE_CHARS else masked[:MESSAGE_CHARS] + TRUNCATED


def message_of_body(text: str, content_type: str = "") -> str:
    """The words of an error body: its JSON `message`/`error`/`detail` fields, else the text itself. An HTML
    page is written for people, not the model, and is left out."""
    if "html" in content_type.lower():
        return ""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    return _message_in(body, 0) or text


def _message_in(value: Any, depth: int) -> str:
    if depth > MAX_DEPTH:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "; ".join(found for item in value if (found := _message_in(item, depth + 1)))
    if not isinstance(value, dict):
        return ""
    if isinstance(value.get("msg"), str) and isinstance(value.get("loc"), list):  # pydantic's (FastAPI's) 422
        return f"{'.'.join(str(part) for part in value['loc'])}: {value['msg']}"
    for key in MESSAGE_KEYS:
        found = _message_in(value.get(key), depth + 1)
        if found:
            return found
    return ""


def code_of_body(text: str) -> str | None:
    """The service's own error code: a JSON body's `code` or `error_code`, at its top or under `error`."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    holders = (body, body.get("error")) if isinstance(body, dict) else ()
    for holder in holders:
        for key in CODE_KEYS if isinstance(holder, dict) else ():
            value = holder.get(key)
            if isinstance(value, str) and CODE_PATTERN.match(value):
                return value
    return None


def fenced(words: str, *, adapter: str, source: str) -> str:
    """The service's bounded words as the model reads them: fenced, with where they came from."""
    origin = {"source": source, "adapter": adapter, "untrusted": True, "active_content_removed": 0}
    return for_model(words, origin) if words else ""


def refusal(
    error_class: str,
    message: str,
    *,
    said: str,
    adapter: str,
    source: str,
    code: str | None = None,
    downstream_code: str | None = None,
    **extra: Any,
) -> CallError:
    """The typed error for a refusal of `error_class`, carrying what the service said (when it said anything)."""
    error_type, default_code = REFUSALS[error_class]
    words = fenced(bounded(said), adapter=adapter, source=source)
    return error_type(
        message,
        code=code or default_code,
        downstream_message=words or None,
        downstream_code=downstream_code,
        **extra,
    )


def with_declared_meaning(error: CallError, declared: Any) -> str:
    """Give an error that carries the service's own code the manifest's `meaning` and `retryable` for it.

    Returns the code when the manifest does not declare it (the error stays typed as it was), else "".
    """
    code = error.extra.get("downstream_code")
    if not code:
        return ""
    entry = next((e for e in declared or () if isinstance(e, dict) and e.get("code") == code), None)
    if entry is None:
        return code
    error.extra["meaning"] = str(entry.get("meaning", ""))
    error.extra["retryable"] = bool(entry.get("retryable"))
    return ""


def tool_refusal(tool: str, said: str, *, jsonrpc_code: int | None = None) -> CallError:
    """An MCP tool's error (an `isError` result, or a JSON-RPC error) classed by what it says."""
    error_class = class_of_message(said, jsonrpc_code=jsonrpc_code)
    code = "tool_error" if error_class == "unavailable" else None
    shown = "" if jsonrpc_code == JSONRPC_INTERNAL_ERROR else said
    return refusal(
        error_class,
        f"The MCP tool {tool} reported an error.",
        said=shown,
        adapter="mcp",
        source=tool,
        code=code,
        downstream_code=code_of_body(said),
    )
