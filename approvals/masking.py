"""Masking of sensitive argument fields for display (cards, audit diffs, the approver API)."""

from typing import Any

MASK = "••••••"
SENSITIVE_WORDS = ("password", "secret", "token", "api_key", "apikey", "card_number", "cvv", "ssn", "iban",
                   "private_key", "credential", "authorization")


def _is_sensitive_key(key: str, schema: dict | None) -> bool:
    lowered = key.lower()
    if any(word in lowered for word in SENSITIVE_WORDS):
        return True
    prop = ((schema or {}).get("properties") or {}).get(key) or {}
    return bool(prop.get("x-sensitive") or prop.get("writeOnly") or prop.get("x-airlock-sensitive"))


def _child_schema(schema: dict | None, key: str | None = None) -> dict | None:
    if not isinstance(schema, dict):
        return None
    if key is None:
        items = schema.get("items")
        return items if isinstance(items, dict) else None
    prop = (schema.get("properties") or {}).get(key)
    return prop if isinstance(prop, dict) else None


def mask(value: Any, schema: dict | None = None) -> Any:
    """The value with every sensitive field (by name or schema annotation) replaced by MASK."""
    if isinstance(value, dict):
        return {
            key: MASK if _is_sensitive_key(str(key), schema) and item not in (None, "") else mask(
                item, _child_schema(schema, str(key)))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask(item, _child_schema(schema)) for item in value]
    return value


def unmask(edited: Any, original: Any) -> Any:
    """Edited arguments where a field still shows MASK keep the original (hidden) value."""
    if edited == MASK:
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
