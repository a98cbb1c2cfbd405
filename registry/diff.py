"""What changed between two manifests: schema fields added, removed and changed, breaking ones flagged.

A change to the input schema is breaking when a caller written for the old version can send
arguments the new one refuses: a new required field, a removed field, a type change, or a
narrowed enum.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added, removed, changed
    detail: str
    breaking: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _types(schema: dict) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        return set()
    return {declared} if isinstance(declared, str) else set(declared)


def _compare_object(old: dict, new: dict, path: str, *, input_side: bool) -> list[Change]:
    changes: list[Change] = []
    old_props: dict = old.get("properties") or {}
    new_props: dict = new.get("properties") or {}
    old_required = set(old.get("required") or [])
    new_required = set(new.get("required") or [])
    for name in sorted(set(new_props) - set(old_props)):
        required = name in new_required
        changes.append(
            Change(
                f"{path}.properties.{name}",
                "added",
                "new required field" if required else "new optional field",
                breaking=input_side and required,
            )
        )
    for name in sorted(set(old_props) - set(new_props)):
        changes.append(Change(f"{path}.properties.{name}", "removed", "field removed", breaking=True))
    for name in sorted(set(old_props) & set(new_props)):
        prop_path = f"{path}.properties.{name}"
        if name in new_required and name not in old_required:
            changes.append(Change(prop_path, "changed", "field became required", breaking=input_side))
        elif name in old_required and name not in new_required:
            changes.append(Change(prop_path, "changed", "field became optional", breaking=not input_side))
        changes.extend(_compare_schema(old_props[name], new_props[name], prop_path, input_side=input_side))
    return changes


def _compare_schema(old: Any, new: Any, path: str, *, input_side: bool) -> list[Change]:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else [Change(path, "changed", "schema changed", breaking=True)]
    changes: list[Change] = []
    old_types, new_types = _types(old), _types(new)
    if old_types != new_types:
        widened = old_types <= new_types if input_side else new_types <= old_types
        changes.append(
            Change(
                path,
                "changed",
                f"type {'/'.join(sorted(old_types)) or 'any'} -> {'/'.join(sorted(new_types)) or 'any'}",
                breaking=not widened or not old_types,
            )
        )
    if "enum" in old or "enum" in new:
        old_enum, new_enum = old.get("enum"), new.get("enum")
        if old_enum is None:
            changes.append(Change(path, "changed", f"enum added: {new_enum}", breaking=input_side))
        elif new_enum is None:
            changes.append(Change(path, "changed", "enum removed", breaking=not input_side))
        else:
            dropped = [value for value in old_enum if value not in new_enum]
            added = [value for value in new_enum if value not in old_enum]
            if dropped:
                changes.append(Change(path, "changed", f"enum narrowed: removed {dropped}", breaking=input_side))
            if added:
                changes.append(Change(path, "changed", f"enum widened: added {added}", breaking=not input_side))
    for keyword in ("minLength", "maxLength", "minimum", "maximum", "pattern", "format", "default", "description"):
        if old.get(keyword) != new.get(keyword):
            changes.append(Change(path, "changed", f"{keyword}: {old.get(keyword)!r} -> {new.get(keyword)!r}"))
    if "object" in (old_types | new_types) or "properties" in old or "properties" in new:
        changes.extend(_compare_object(old, new, path, input_side=input_side))
    if isinstance(old.get("items"), dict) or isinstance(new.get("items"), dict):
        changes.extend(
            _compare_schema(old.get("items") or {}, new.get("items") or {}, f"{path}.items", input_side=input_side)
        )
    return changes


def breaking_input_changes(old_schema: dict, new_schema: dict) -> list[Change]:
    return [c for c in _compare_schema(old_schema, new_schema, "$.input_schema", input_side=True) if c.breaking]


def diff_manifests(old: dict, new: dict) -> list[Change]:
    """Every difference a reviewer cares about, in a stable order; breaking input changes flagged."""
    changes = _compare_schema(
        old.get("input_schema", {}), new.get("input_schema", {}), "$.input_schema", input_side=True
    )
    changes += [
        Change(c.path, c.kind, c.detail, breaking=False)
        for c in _compare_schema(
            old.get("output_schema", {}), new.get("output_schema", {}), "$.output_schema", input_side=False
        )
    ]
    for section in ("description", "risk", "permissions", "execution", "ownership"):
        old_value, new_value = old.get(section), new.get(section)
        if isinstance(old_value, dict) and isinstance(new_value, dict):
            for key in sorted(set(old_value) | set(new_value)):
                if old_value.get(key) != new_value.get(key):
                    kind = "added" if key not in old_value else "removed" if key not in new_value else "changed"
                    changes.append(
                        Change(f"$.{section}.{key}", kind, f"{old_value.get(key)!r} -> {new_value.get(key)!r}")
                    )
        elif old_value != new_value:
            changes.append(
                Change(
                    f"$.{section}",
                    "changed",
                    "text changed" if section == "description" else f"{old_value!r} -> {new_value!r}",
                )
            )
    return changes
