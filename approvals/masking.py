"""Masking for display (cards, request pages, the approver API, audit diffs) on the one definition of
"sensitive" in `lib.sensitivity`, which redaction at rest uses too: sensitive fields show MASK, and
secret-looking substrings are masked inside any text. Everything else is shown as it is."""

from typing import Any

from lib.sensitivity import child_schema, is_sensitive_field, item_schema, mask_secrets

MASK = "••••••"


def mask(value: Any, schema: dict | None = None) -> Any:
    """The value as an approver may see it."""
    if isinstance(value, dict):
        return {
            key: MASK
            if item not in (None, "") and is_sensitive_field(str(key), item, child_schema(schema, str(key)))
            else mask(item, child_schema(schema, str(key)))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask(item, item_schema(schema)) for item in value]
    if isinstance(value, str):
        return mask_secrets(value)
    return value


def unmask(edited: Any, original: Any) -> Any:
    """Edited arguments where a value still shows its masked form keep the original (hidden) value."""
    if edited == MASK:
        return original
    if isinstance(edited, str) and isinstance(original, str) and edited == mask_secrets(original):
        return original
    if isinstance(edited, dict) and isinstance(original, dict):
        return {key: unmask(item, original.get(key)) for key, item in edited.items()}
    if isinstance(edited, list) and isinstance(original, list):
        return [unmask(item, original[i] if i < len(original) else None) for i, item in enumerate(edited)]
    return edited


def diff(before: Any, after: Any, path: str = "") -> list[dict]:
    """A flat list of changes {"path", "op", "from", "to"} between two JSON values."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}/{key}"
            if key not in after:
                changes.append({"path": sub, "op": "remove", "from": before[key], "to": None})
            elif key not in before:
                changes.append({"path": sub, "op": "add", "from": None, "to": after[key]})
            else:
                changes.extend(diff(before[key], after[key], sub))
        return changes
    if before != after:
        return [{"path": path or "/", "op": "replace", "from": before, "to": after}]
    return []
