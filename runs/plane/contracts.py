"""Output contracts: a result must match the skill's `output_schema`, else the agent gets `internal`."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from lib.schema_patterns import SchemaValidator, UnsupportedPattern

UNEXPECTED_SHAPE = "The tool returned an unexpected shape; the result was withheld and the owners were told."


@lru_cache(maxsize=512)
def _validator(schema_text: str) -> Draft202012Validator | None:
    schema = json.loads(schema_text)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return SchemaValidator(schema)  # the owner's patterns run on RE2: a tool's result cannot make them backtrack


def violation(content: Any, schema: dict | None) -> str:
    """'' when the content matches the schema (or there is none), else where and how it differs."""
    if not schema:
        return ""
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator is None:
        return ""
    try:
        error = next(iter(sorted(validator.iter_errors(content), key=lambda e: list(e.absolute_path))), None)
    except UnsupportedPattern:  # published before publication refused it; like an invalid schema, no contract
        return ""
    if error is None:
        return ""
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return (
        f"{path}: {error.validator} {error.validator_value!r}"[:300]
        if error.validator != "type"
        else f"{path}: expected {error.validator_value}"[:300]
    )
