"""Argument validation: JSON Schema Draft 2020-12 with format checking, one validator per skill version.

The owner's `pattern`s run on RE2 (lib.schema_patterns): an agent's input cannot make them backtrack.
"""

from __future__ import annotations

import threading

from jsonschema import Draft202012Validator, FormatChecker

from lib.schema_patterns import SchemaValidator, UnsupportedPattern
from runs.errors import Internal, ValidationFailed
from traces.redaction import redact

_validators: dict[int | str, tuple[dict, Draft202012Validator]] = {}
_lock = threading.Lock()
_format_checker = FormatChecker()


def validator_for(skill_version_id: int | str, schema: dict) -> Draft202012Validator:
    """Compiled once per skill version (published versions are immutable)."""
    cached = _validators.get(skill_version_id)
    # Published versions never change; the identity/equality check guards against a reused id.
    if cached is not None and (cached[0] is schema or cached[0] == schema):
        return cached[1]
    validator = SchemaValidator(schema or {"type": "object"}, format_checker=_format_checker)
    with _lock:
        _validators[skill_version_id] = (schema, validator)
    return validator


def validate_arguments(
    *, skill_version_id: int | str, schema: dict, version: str, name: str, arguments: object
) -> None:
    fields = argument_errors(
        skill_version_id=skill_version_id, schema=schema, version=version, name=name, arguments=arguments
    )
    if not fields:
        return
    raise ValidationFailed(
        f"The arguments do not match {name} {version}: "
        + "; ".join(f"{f['field']}: {f['message']}" for f in fields[:5]),
        fields=fields,
        schema_version=version,
    )


def argument_errors(
    *, skill_version_id: int | str, schema: dict, version: str, name: str, arguments: object
) -> list[dict]:
    """What is wrong with the arguments, field by field (at most 20); empty when they match the schema."""
    validator = validator_for(skill_version_id, schema)
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except UnsupportedPattern as exc:
        # Published before publication refused such patterns: refuse the call rather than backtrack.
        raise Internal(
            f"{name} {version} has an input pattern Airlock cannot run safely ({exc}); its owners must "
            "publish a version without it.",
            code="unsupported_pattern",
        ) from None
    return [
        {"field": "/".join(str(p) for p in error.absolute_path) or "(arguments)", "message": _message(error)}
        for error in errors[:20]
    ]


def _message(error) -> str:
    """jsonschema's message echoes the value; a value holding a sensitive field (or a secret) is not
    echoed: the message names the rule it broke instead, so the error result stores nothing of it."""
    if redact(error.instance, schema=error.schema if isinstance(error.schema, dict) else None) == error.instance:
        return error.message
    rule = repr(error.validator_value)
    return f"the value does not satisfy {error.validator}" + (f" {rule}" if len(rule) <= 100 else "")


def clear_cache() -> None:
    with _lock:
        _validators.clear()
