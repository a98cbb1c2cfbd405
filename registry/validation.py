"""Validation of a manifest before it may be stored as a version, and the definition linter.

`validate_manifest` returns errors (publication refused); `lint_manifest` returns warnings
(tool definitions are prompts: vague ones make models pick the wrong tool). Each item is a
dict `{"path": "$.risk.approval", "code": "...", "message": "..."}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from console.models import Team
from lib.schema_patterns import unsupported_patterns
from registry.diff import breaking_input_changes
from registry.models import Skill, SkillVersion, VersionStatus

SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")
# Segments are snake case without "__", so model-facing names can map "." to "__" and back.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*(\.[a-z][a-z0-9]*(_[a-z0-9]+)*)+$")
MUTATING_EFFECTS = {"write", "external", "destructive"}
TIMEOUT_BOUNDS_MS = (100, 120_000)
ATTEMPT_BOUNDS = (1, 5)
RESULT_LIMIT_BOUNDS = (256, 1_048_576)


@cache
def manifest_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _manifest_validator() -> Draft202012Validator:
    return Draft202012Validator(manifest_schema(), format_checker=FormatChecker())


@cache
def _meta_validator() -> Draft202012Validator:
    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def problem(path: str, code: str, message: str, **extra: Any) -> dict:
    return {"path": path, "code": code, "message": message, **extra}


def parse_semver(version: str) -> tuple[int, int, int] | None:
    match = re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", version or "")
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore[return-value]


def _schema_errors(manifest: Any) -> list[dict]:
    errors = sorted(_manifest_validator().iter_errors(manifest), key=lambda e: (e.json_path, e.message))
    return [problem(error.json_path, "schema", error.message) for error in errors]


def _nested_schema_errors(manifest: dict, key: str) -> list[dict]:
    schema = manifest.get(key)
    if not isinstance(schema, dict):
        return []
    errors = sorted(_meta_validator().iter_errors(schema), key=lambda e: e.json_path)
    return [
        problem(f"$.{key}{error.json_path[1:]}", "invalid_json_schema", f"Not a valid JSON Schema: {error.message}")
        for error in errors
    ]


def _pattern_errors(manifest: dict) -> list[dict]:
    """Owner patterns run on agent input with RE2 (lib.schema_patterns); one RE2 cannot run is refused here."""
    return [
        problem(path, "unsupported_pattern", reason)
        for key in ("input_schema", "output_schema")
        for path, reason in unsupported_patterns(manifest.get(key), f"$.{key}")
    ]


def _object_schemas(schema: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every subschema describing an object, with its JSON path."""
    if not isinstance(schema, dict):
        return
    types = schema.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in schema
    if is_object:
        yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _object_schemas(sub, f"{path}.properties.{name}")
    for keyword in ("$defs", "definitions", "patternProperties"):
        for name, sub in (schema.get(keyword) or {}).items():
            yield from _object_schemas(sub, f"{path}.{keyword}.{name}")
    for keyword in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        if isinstance(schema.get(keyword), dict):
            yield from _object_schemas(schema[keyword], f"{path}.{keyword}")
    for keyword in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for position, sub in enumerate(schema.get(keyword) or []):
            yield from _object_schemas(sub, f"{path}.{keyword}[{position}]")


def _closed_objects(manifest: dict) -> list[dict]:
    schema = manifest.get("input_schema")
    if not isinstance(schema, dict):
        return []
    errors = []
    if schema.get("type") != "object":
        errors.append(
            problem(
                "$.input_schema.type", "input_not_object", "The input schema must describe an object (type: object)."
            )
        )
    for path, sub in _object_schemas(schema, "$.input_schema"):
        if sub.get("additionalProperties") is not False:
            errors.append(
                problem(
                    f"{path}.additionalProperties",
                    "open_object",
                    "Every object schema in input_schema must set additionalProperties: false.",
                )
            )
    return errors


def _risk_rules(manifest: dict) -> list[dict]:
    risk, execution = manifest.get("risk") or {}, manifest.get("execution") or {}
    errors = []
    attempts = execution.get("max_attempts")
    if (
        risk.get("effect") in MUTATING_EFFECTS
        and isinstance(attempts, int)
        and attempts > 1
        and execution.get("idempotent") is not True
    ):
        errors.append(
            problem(
                "$.execution.idempotent",
                "retry_needs_idempotent",
                f"A {risk['effect']} skill retried up to {attempts} times must declare "
                "idempotent: true (or set max_attempts to 1).",
            )
        )
    if risk.get("effect") == "destructive" and risk.get("approval") == "not_required":
        errors.append(
            problem(
                "$.risk.approval",
                "destructive_needs_approval",
                "A destructive skill cannot have approval: not_required.",
            )
        )
    return errors


def _bounds(manifest: dict) -> list[dict]:
    execution = manifest.get("execution") or {}
    errors = []
    for key, (low, high), code in (
        ("timeout_ms", TIMEOUT_BOUNDS_MS, "timeout_out_of_bounds"),
        ("max_attempts", ATTEMPT_BOUNDS, "attempts_out_of_bounds"),
        ("result_limit_bytes", RESULT_LIMIT_BOUNDS, "result_limit_out_of_bounds"),
    ):
        value = execution.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high:
            errors.append(problem(f"$.execution.{key}", code, f"{key} must be between {low} and {high}, not {value}."))
    return errors


DISCOVERY_LISTS = ("synonyms", "examples", "tags")


def _result_presentation(manifest: dict) -> list[dict]:
    """Views name a default that exists; a declared cursor goes back into an argument the skill takes,
    and only a read is called again for a page."""
    errors = []
    views = manifest.get("output_views")
    if views and views.get("default") is not None and views["default"] not in views["views"]:
        errors.append(
            problem(
                "$.output_views.default",
                "unknown_default_view",
                f"The default view {views['default']!r} is not one of the views ({', '.join(views['views'])}).",
            )
        )
    pagination = manifest.get("pagination")
    if pagination:
        inputs = (manifest.get("input_schema") or {}).get("properties") or {}
        if pagination["cursor_argument"] not in inputs:
            errors.append(
                problem(
                    "$.pagination.cursor_argument",
                    "cursor_argument_undeclared",
                    f"cursor_argument {pagination['cursor_argument']!r} must be a property of the input_schema.",
                )
            )
        if (manifest.get("risk") or {}).get("effect") != "read":
            errors.append(
                problem(
                    "$.pagination",
                    "pagination_needs_read",
                    "Only a read skill is called again for its next page; a list cut from another effect's result "
                    "is paged from the stored result without a declared cursor.",
                )
            )
    return errors


def _discovery_terms(manifest: dict) -> list[dict]:
    """Owners' discovery words: no blank entry, no duplicate (case and spacing ignored)."""
    errors = []
    for key in DISCOVERY_LISTS:
        values = manifest.get(key)
        if not isinstance(values, list):
            continue
        seen: dict[str, int] = {}
        for position, value in enumerate(values):
            if not isinstance(value, str):
                continue  # the schema says so
            normal = " ".join(value.lower().split())
            if not normal:
                errors.append(problem(f"$.{key}[{position}]", "blank_entry", f"{key}[{position}] is blank."))
            elif normal in seen:
                errors.append(
                    problem(
                        f"$.{key}[{position}]",
                        "duplicate_entry",
                        f"{key}[{position}] repeats {key}[{seen[normal]}] ({value.strip()!r}); list each once.",
                    )
                )
            else:
                seen[normal] = position
    return errors


def _declared_error_codes(manifest: dict) -> list[dict]:
    """Each declared error code once: the agent's error carries one meaning per code."""
    errors, seen = [], {}
    for position, entry in enumerate(manifest.get("errors") or []):
        code = entry.get("code") if isinstance(entry, dict) else None
        if not isinstance(code, str):
            continue  # the schema says so
        if code in seen:
            errors.append(
                problem(
                    f"$.errors[{position}].code",
                    "duplicate_entry",
                    f"errors[{position}] repeats the code {code!r} of errors[{seen[code]}]; declare each code once.",
                )
            )
        else:
            seen[code] = position
    return errors


def _references(manifest: dict, skill: Skill | None) -> list[dict]:
    errors = []
    name = manifest.get("name")
    if isinstance(name, str) and not NAME_PATTERN.match(name):
        errors.append(
            problem(
                "$.name",
                "name_namespace",
                "The name must be namespace.skill_name in lowercase snake case, "
                "for example billing.create_refund_request.",
            )
        )
    if skill is not None:
        if isinstance(name, str) and name != skill.name:
            errors.append(
                problem("$.name", "name_mismatch", f"This is a version of {skill.name}; the name cannot change.")
            )
        if manifest.get("skill_id") not in (None, skill.skill_id):
            errors.append(
                problem("$.skill_id", "skill_id_mismatch", f"The skill_id of {skill.name} is {skill.skill_id}.")
            )
    else:
        if isinstance(name, str) and Skill.objects.filter(name=name).exists():
            errors.append(problem("$.name", "name_taken", f"A skill named {name} exists; add a version to it instead."))
        skill_id = manifest.get("skill_id")
        if isinstance(skill_id, str) and Skill.objects.filter(skill_id=skill_id).exists():
            errors.append(problem("$.skill_id", "skill_id_taken", f"The skill_id {skill_id} is already used."))
    team = (manifest.get("ownership") or {}).get("team")
    if isinstance(team, str) and not Team.objects.filter(slug=team).exists():
        errors.append(problem("$.ownership.team", "unknown_team", f"No team {team!r} exists."))
    replacement = (manifest.get("compatibility") or {}).get("replacement_skill_id")
    if isinstance(replacement, str):
        target = Skill.objects.filter(skill_id=replacement).first() or Skill.objects.filter(name=replacement).first()
        if target is None:
            errors.append(
                problem(
                    "$.compatibility.replacement_skill_id", "unknown_replacement", f"No skill {replacement!r} exists."
                )
            )
        elif not target.versions.filter(status=VersionStatus.ACTIVE).exists():
            errors.append(
                problem(
                    "$.compatibility.replacement_skill_id",
                    "replacement_not_active",
                    f"The replacement {target.name} has no active version.",
                )
            )
    return errors


def _versioning(manifest: dict, previous: SkillVersion | None) -> list[dict]:
    new = parse_semver(manifest.get("version", "")) if isinstance(manifest.get("version"), str) else None
    if previous is None or new is None:
        return []
    errors = []
    if new <= previous.semver:
        errors.append(
            problem(
                "$.version",
                "version_not_greater",
                f"The version must be greater than the latest published {previous.version}.",
            )
        )
    old_input, new_input = previous.manifest.get("input_schema"), manifest.get("input_schema")
    if isinstance(old_input, dict) and isinstance(new_input, dict) and new[0] <= previous.major:
        breaking = breaking_input_changes(old_input, new_input)
        if breaking:
            errors.append(
                problem(
                    "$.version",
                    "breaking_change_needs_major",
                    f"Breaking input changes need a major version bump (> {previous.major}.x.x): "
                    + "; ".join(f"{c.path}: {c.detail}" for c in breaking),
                    breaking_changes=[c.as_dict() for c in breaking],
                )
            )
    return errors


def validate_manifest(manifest: Any, *, skill: Skill | None = None, previous: SkillVersion | None = None) -> list[dict]:
    """Every reason this manifest cannot be published; empty when it may be.

    `skill` is the existing skill this is a new version of (None for a new skill); `previous`
    its latest published version, against which the version number and breaking changes are checked.
    """
    if not isinstance(manifest, dict):
        return [problem("$", "schema", "The manifest must be a JSON object.")]
    errors = _schema_errors(manifest)
    rules = (
        lambda: _nested_schema_errors(manifest, "input_schema"),
        lambda: _nested_schema_errors(manifest, "output_schema"),
        lambda: _pattern_errors(manifest),
        lambda: _closed_objects(manifest),
        lambda: _risk_rules(manifest),
        lambda: _bounds(manifest),
        lambda: _result_presentation(manifest),
        lambda: _discovery_terms(manifest),
        lambda: _declared_error_codes(manifest),
        lambda: _references(manifest, skill),
        lambda: _versioning(manifest, previous),
    )
    for rule in rules:
        try:
            errors += rule()
        except (TypeError, AttributeError, KeyError, ValueError):
            if not errors:  # a manifest the schema accepts must never trip a rule
                raise
            # A section of the wrong shape: the schema errors above already say what is wrong.
    return errors


# --- the definition linter -------------------------------------------------------------------

SIDE_EFFECT_WORDS = re.compile(
    r"\b(no side effects?|read[- ]only|does not (change|modify|send)|sends?|creates?|writes?|updates?|deletes?|"
    r"removes?|charges?|refunds?|changes?|irreversibl\w*|cannot be undone)\b",
    re.I,
)
WHEN_WORDS = re.compile(
    r"\b(use (it |this )?(for|when|to|before|after|only|instead)|when you|do not use|only for)\b", re.I
)
ENUM_LIKE_NAMES = {
    "status",
    "state",
    "type",
    "kind",
    "category",
    "priority",
    "level",
    "mode",
    "severity",
    "tier",
    "channel",
    "reason",
    "currency",
    "sort",
    "order",
}
AMBIGUOUS_VERBS = {"remove", "delete", "drop", "purge", "destroy", "erase", "cancel", "clear"}
LOOKUP_VERBS = {"get", "fetch", "read", "lookup", "find", "load"}
PAGINATION_INPUTS = {"cursor", "page", "page_token", "offset", "limit", "max_results", "page_size"}
EMPTY_WORDS = re.compile(r"\b(empty|not[ _]found|no results?|none|nothing)\b", re.I)


def _lint_description(description: str) -> list[dict]:
    warnings = []
    if len(description) < 60:
        warnings.append(
            problem(
                "$.description",
                "description_too_short",
                "Say what the skill does, when to use it, and what side effects it has.",
            )
        )
    if not WHEN_WORDS.search(description):
        warnings.append(
            problem(
                "$.description",
                "description_missing_when",
                "Say when to use this skill (and when not to), e.g. 'Use for ...'.",
            )
        )
    if not SIDE_EFFECT_WORDS.search(description):
        warnings.append(
            problem(
                "$.description",
                "description_missing_side_effects",
                "State the side effects, or 'No side effects' for a read.",
            )
        )
    return warnings


def _lint_name(name: str, input_schema: dict, effect: str) -> list[dict]:
    tool = name.rsplit(".", 1)[-1]
    verb = tool.split("_")[0]
    properties = _object(input_schema.get("properties"))
    warnings = []
    if verb in AMBIGUOUS_VERBS and "permanently" not in tool:
        warnings.append(
            problem(
                "$.name",
                "name_hides_reversibility",
                f"'{tool}' does not say whether it can be undone: prefer archive_..., "
                f"soft_delete_... or {verb}_..._permanently.",
            )
        )
    if verb in LOOKUP_VERBS and "id" in properties:
        warnings.append(
            problem(
                "$.input_schema.properties.id",
                "name_hides_lookup_key",
                "Name the lookup key: use a specific parameter (user_id, order_id) or _by_<key>.",
            )
        )
    if effect == "destructive" and "permanently" not in tool and verb not in AMBIGUOUS_VERBS:
        warnings.append(
            problem(
                "$.name",
                "name_hides_reversibility",
                "A destructive skill's name should make irreversibility explicit (..._permanently).",
            )
        )
    return warnings


def _lint_enums(schema: Any, path: str) -> list[dict]:
    warnings = []
    for name, sub in _object(_object(schema).get("properties")).items():
        if not isinstance(sub, dict):
            continue
        if (
            sub.get("type") == "string"
            and "enum" not in sub
            and "const" not in sub
            and name.split("_")[-1] in ENUM_LIKE_NAMES
        ):
            warnings.append(
                problem(
                    f"{path}.properties.{name}",
                    "free_form_string",
                    f"'{name}' looks like a closed set of values: declare an enum.",
                )
            )
        warnings += _lint_enums(sub, f"{path}.properties.{name}")
    return warnings


def _object(value: Any) -> dict:
    """The value when it is an object, else {}: lint also runs on manifests that validation refused."""
    return value if isinstance(value, dict) else {}


def _lint_output(manifest: dict) -> list[dict]:
    output, warnings = _object(manifest.get("output_schema")), []
    for name, sub in _object(output.get("properties")).items():
        if isinstance(sub, dict) and not sub.get("description"):
            warnings.append(
                problem(
                    f"$.output_schema.properties.{name}",
                    "undocumented_result_field",
                    f"Describe the result field '{name}'.",
                )
            )
    text = str(manifest.get("description") or "") + json.dumps(output)
    if not EMPTY_WORDS.search(text):
        warnings.append(
            problem("$.output_schema", "empty_result_undocumented", "Say what an empty or not-found result means.")
        )
    tool = str(manifest.get("name") or "").rsplit(".", 1)[-1]
    returns_list = output.get("type") == "array" or any(
        isinstance(sub, dict) and sub.get("type") == "array" for sub in _object(output.get("properties")).values()
    )
    inputs = set(_object(_object(manifest.get("input_schema")).get("properties")))
    if (
        (returns_list or tool.startswith(("list_", "search_")))
        and not (inputs & PAGINATION_INPUTS)
        and "next_cursor" not in _object(output.get("properties"))
        and not manifest.get("pagination")
    ):
        warnings.append(
            problem(
                "$.input_schema",
                "no_pagination",
                "A list result needs a bound and a way to page: take a limit and a cursor, and declare "
                "`pagination` (cursor_field, cursor_argument) so that the model gets a `next` handle it can "
                "follow; a list cut to result_limit_bytes is paged from the stored result (docs/registry.md, Pages).",
            )
        )
    return warnings


def lint_manifest(manifest: Any) -> list[dict]:
    """Warnings for owners: they do not block publication."""
    if not isinstance(manifest, dict):
        return []
    description = manifest.get("description") if isinstance(manifest.get("description"), str) else ""
    input_schema = manifest.get("input_schema") if isinstance(manifest.get("input_schema"), dict) else {}
    effect = (manifest.get("risk") or {}).get("effect", "") if isinstance(manifest.get("risk"), dict) else ""
    warnings = _lint_description(description)
    if isinstance(manifest.get("name"), str):
        warnings += _lint_name(manifest["name"], input_schema, effect)
    warnings += _lint_enums(input_schema, "$.input_schema")
    warnings += _lint_output(manifest)
    warnings += _lint_errors(manifest)
    return warnings


def _lint_errors(manifest: dict) -> list[dict]:
    """A tool that declares no error codes leaves the model guessing what a refusal means."""
    if manifest.get("errors"):
        return []
    return [
        problem(
            "$.errors",
            "undocumented_errors",
            "Declare the error codes the tool returns (errors: code, meaning, retryable), so the agent knows "
            "what each means and whether retrying can help.",
        )
    ]
