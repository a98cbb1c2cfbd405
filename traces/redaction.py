"""The one redaction every stored or returned text goes through, on the one definition of "sensitive"
in `lib.sensitivity`.

`redact` for JSON payloads: arguments (stored), tool results (before the agent gets them and before
they are stored, with the skill's `output_schema`), span attributes, run events (and so webhook
bodies), approval context, outcomes and audit details. `redact_text` for free-text fields: a run's
task, status reason and taint source, trace and span names, decline reasons, a call id that looks
like a secret, error messages. The access log goes through `lib.log_redaction`, on the same masks.

Three layers, each deterministic:
1. sensitive fields (marked by the schema, or credentials by their key) are replaced by a hash and
   a two-character preview;
2. strings that look like secrets are masked wherever they appear, inside longer text too
   (`password=…` and `Authorization: Bearer …` written inline included);
3. for `confidential` and `restricted` skills the whole payload becomes a hash and a masked preview.
Each is idempotent: redacting what is already redacted changes nothing.
"""

import hashlib
from typing import Any

from lib.canonical import canonical_json
from lib.sensitivity import (
    child_schema,
    is_secret_key,
    is_sensitive_field,
    is_sensitive_schema,
    item_schema,
    looks_secret,
    mask_secrets,
    safe_key_of,
)

WHOLE_PAYLOAD_CLASSIFICATIONS = frozenset({"confidential", "restricted"})
PREVIEW_CHARS = 2
MAX_DEPTH = 64


def sha256_hex(value: Any) -> str:
    if isinstance(value, str):
        return hashlib.sha256(value.encode()).hexdigest()
    try:
        return hashlib.sha256(canonical_json(value)).hexdigest()
    except Exception:  # non-JSON values (floats like NaN, custom objects): hash their repr
        return hashlib.sha256(repr(value).encode()).hexdigest()


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return (text[:PREVIEW_CHARS] + "…") if text else ""


def redacted_marker(value: Any, *, reason: str = "sensitive") -> dict[str, Any]:
    """What a sensitive value becomes: enough to compare and recognise, nothing to reuse."""
    return {"redacted": True, "reason": reason, "sha256": sha256_hex(value), "preview": _preview(value)}


def _walk(value: Any, schema: Any, depth: int) -> Any:
    if schema is not None and is_sensitive_schema(schema):
        return redacted_marker(value)
    if depth > MAX_DEPTH:
        return redacted_marker(value, reason="too_deep")
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            safe_key = safe_key_of(str(key))
            if is_secret_key(str(key)) and is_sensitive_field(str(key), item, None):
                out[safe_key] = redacted_marker(item, reason="secret_key")
            else:
                out[safe_key] = _walk(item, child_schema(schema, str(key)), depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = item_schema(schema)
        return [_walk(item, items, depth + 1) for item in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return mask_secrets(str(value))


def redact(value: Any, *, schema: dict | None = None, data_classification: str = "internal") -> Any:
    """Return a JSON value safe to store. Never raises on odd input; never returns a raw secret."""
    if data_classification in WHOLE_PAYLOAD_CLASSIFICATIONS:
        if value is None:
            return None
        marker = redacted_marker(value, reason=data_classification)
        marker["preview"] = _preview(mask_secrets(value if isinstance(value, str) else _compact(value)))
        return marker
    return _walk(value, schema, 0)


def redact_text(text: Any, *, limit: int | None = None) -> str:
    """A free-text field as it may be stored or shown: secrets masked, then cut to `limit` characters."""
    masked = mask_secrets(text if isinstance(text, str) else "" if text is None else str(text))
    return masked[:limit] if limit is not None else masked


def _compact(value: Any) -> str:
    try:
        return canonical_json(value).decode()
    except Exception:
        return repr(value)


__all__ = [
    "MAX_DEPTH",
    "WHOLE_PAYLOAD_CLASSIFICATIONS",
    "is_secret_key",
    "is_sensitive_schema",
    "looks_secret",
    "mask_secrets",
    "redact",
    "redact_text",
    "redacted_marker",
    "sha256_hex",
]
