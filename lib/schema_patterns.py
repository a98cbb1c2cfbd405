"""Owner-supplied JSON Schema patterns, run in linear time.

A skill's `pattern` and `patternProperties` keys are written by its owner and run on input the
agent chose. jsonschema runs them with Python's backtracking `re`, where `^(a+)+$` takes seconds
on a few dozen characters. Here they run on RE2 (google-re2), which has no backtracking: time
grows with the input's length, never exponentially. RE2 has no backreferences or lookaround, so
a pattern it cannot compile is refused at publish (`unsupported_patterns`), and a validator built
from `SchemaValidator` never falls back to `re`.

`unevaluatedProperties` beside `patternProperties` would still reach jsonschema's own `re`
(it finds evaluated keys in `jsonschema._utils`), so that pairing is refused at publish too.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to its owner, not printed to stderr

SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_ONES = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
)


class UnsupportedPattern(ValueError):
    """A pattern RE2 cannot compile (a backreference, lookaround, a repetition over 1000, bad syntax)."""


@lru_cache(maxsize=2048)
def compile_pattern(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnsupportedPattern(reason) from None


def pattern_matches(pattern: str, text: str) -> bool:
    """ECMA-262 `pattern` semantics: a match anywhere in the text (the schema anchors with ^ and $)."""
    return compile_pattern(pattern).search(text) is not None


def _pattern(validator, pattern, instance, schema) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not pattern_matches(pattern, instance):
        yield ValidationError(f"{_preview(instance)} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if pattern_matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema) -> Iterator[ValidationError]:
    """jsonschema's own, except that the patternProperties keys run on RE2."""
    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = {key for key in instance if key not in properties and not any(pattern_matches(p, key) for p in patterns)}
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(_preview(each) for each in sorted(extras)[:10])
        if patterns:
            listed = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(
                f"{names} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: {listed}"
            )
        else:
            yield ValidationError(
                f"Additional properties are not allowed ({names} {'was' if len(extras) == 1 else 'were'} unexpected)"
            )


def _preview(value: str, limit: int = 80) -> str:
    """A long agent-supplied string is not echoed whole into every error message."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} characters)"


SchemaValidator = validators.extend(
    Draft202012Validator,
    validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)
"""Draft 2020-12 with every owner pattern on RE2; use it wherever an owner's schema checks data."""


def _subschemas(schema: dict, path: str) -> Iterator[tuple[str, dict]]:
    yield path, schema
    for keyword in SCHEMA_MAPS:
        children = schema.get(keyword)
        if isinstance(children, dict):
            for name, child in children.items():
                if isinstance(child, dict):
                    yield from _subschemas(child, f"{path}.{keyword}.{name}")
    for keyword in SCHEMA_LISTS:
        children = schema.get(keyword)
        if isinstance(children, list):
            for position, child in enumerate(children):
                if isinstance(child, dict):
                    yield from _subschemas(child, f"{path}.{keyword}[{position}]")
    for keyword in SCHEMA_ONES:
        child = schema.get(keyword)
        if isinstance(child, dict):
            yield from _subschemas(child, f"{path}.{keyword}")
        elif keyword == "items" and isinstance(child, list):  # the older tuple form
            for position, item in enumerate(child):
                if isinstance(item, dict):
                    yield from _subschemas(item, f"{path}.items[{position}]")


def unsupported_patterns(schema: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, reason) for every pattern in the schema that cannot run on RE2."""
    if not isinstance(schema, dict):
        return
    uses_pattern_properties, unevaluated = False, []
    for sub_path, sub in _subschemas(schema, path):
        pattern = sub.get("pattern")
        if isinstance(pattern, str):
            yield from _refusal(pattern, f"{sub_path}.pattern")
        pattern_properties = sub.get("patternProperties")
        if isinstance(pattern_properties, dict):
            uses_pattern_properties = uses_pattern_properties or bool(pattern_properties)
            for key in pattern_properties:
                yield from _refusal(key, f"{sub_path}.patternProperties.{key}")
        if "unevaluatedProperties" in sub:
            unevaluated.append(f"{sub_path}.unevaluatedProperties")
    if uses_pattern_properties:
        for unevaluated_path in unevaluated:
            yield (
                unevaluated_path,
                (
                    "unevaluatedProperties cannot be combined with patternProperties in one schema "
                    "(its keys would be matched by a backtracking engine); use "
                    "additionalProperties instead."
                ),
            )


def _refusal(pattern: str, path: str) -> Iterator[tuple[str, str]]:
    try:
        compile_pattern(pattern)
    except UnsupportedPattern as exc:
        yield (
            path,
            (
                f"The pattern {pattern!r} cannot run on Airlock's linear-time regex engine (RE2): {exc}. "
                "Backreferences (\\1), lookahead and lookbehind ((?=, (?!, (?<=, (?<!) and repetitions "
                "over {1000} are not supported; rewrite it without them."
            ),
        )
