"""Manifest validation: each malformed manifest gets its exact error, with a JSON path."""

import copy

import pytest

from registry.validation import lint_manifest, validate_manifest
from tests.registry.factories import make_version, manifest

pytestmark = pytest.mark.django_db


def _drop(path: str):
    def mutate(body: dict) -> None:
        *parents, last = path.split(".")
        target = body
        for part in parents:
            target = target[part]
        del target[last]

    return mutate


def _set(path: str, value):
    def mutate(body: dict) -> None:
        *parents, last = path.split(".")
        target = body
        for part in parents:
            target = target[part]
        target[last] = value

    return mutate


def _both(*mutations):
    def mutate(body: dict) -> None:
        for mutation in mutations:
            mutation(body)

    return mutate


nested_open = {"type": "object", "properties": {"street": {"type": "string"}}}

MALFORMED = [
    ("missing name", _drop("name"), "$", "schema", "'name' is a required property"),
    ("missing risk", _drop("risk"), "$", "schema", "'risk' is a required property"),
    (
        "unknown top-level field",
        _set("colour", "blue"),
        "$",
        "schema",
        "Additional properties are not allowed ('colour' was unexpected)",
    ),
    ("bad semver", _set("version", "1.0"), "$.version", "schema", "'1.0' does not match"),
    ("bad skill_id", _set("skill_id", "search docs"), "$.skill_id", "schema", "does not match"),
    ("unknown effect", _set("risk.effect", "delete"), "$.risk.effect", "schema", "'delete' is not one of"),
    (
        "unknown data class",
        _set("risk.data_classification", "secret"),
        "$.risk.data_classification",
        "schema",
        "'secret' is not one of",
    ),
    ("unknown approval", _set("risk.approval", "maybe"), "$.risk.approval", "schema", "'maybe' is not one of"),
    (
        "roles empty",
        _set("permissions.allowed_agent_roles", []),
        "$.permissions.allowed_agent_roles",
        "schema",
        "should be non-empty",
    ),
    (
        "tenant slug invalid",
        _set("permissions.allowed_tenants", ["Acme Corp"]),
        "$.permissions.allowed_tenants[0]",
        "schema",
        "does not match",
    ),
    (
        "timeout not integer",
        _set("execution.timeout_ms", "5s"),
        "$.execution.timeout_ms",
        "schema",
        "'5s' is not of type 'integer'",
    ),
    ("unknown adapter scheme", _set("execution.adapter", "ftp://x"), "$.execution.adapter", "schema", "does not match"),
    (
        "runbook not a URI",
        _set("ownership.runbook", "see wiki"),
        "$.ownership.runbook",
        "schema",
        "'see wiki' does not match",
    ),
    ("short description", _set("description", "Search."), "$.description", "schema", "is too short"),
    (
        "input schema invalid",
        _set("input_schema.properties.query.type", "text"),
        "$.input_schema.properties.query.type",
        "invalid_json_schema",
        "Not a valid JSON Schema",
    ),
    (
        "output schema invalid",
        _set("output_schema.properties.results.type", 12),
        "$.output_schema.properties.results.type",
        "invalid_json_schema",
        "Not a valid JSON Schema",
    ),
    (
        "input not an object",
        _both(_set("input_schema", {"type": "string"})),
        "$.input_schema.type",
        "input_not_object",
        "must describe an object",
    ),
    (
        "root object open",
        _drop("input_schema.additionalProperties"),
        "$.input_schema.additionalProperties",
        "open_object",
        "additionalProperties: false",
    ),
    (
        "nested object open",
        _set("input_schema.properties.address", nested_open),
        "$.input_schema.properties.address.additionalProperties",
        "open_object",
        "additionalProperties: false",
    ),
    (
        "array item object open",
        _set("input_schema.properties.lines", {"type": "array", "items": nested_open}),
        "$.input_schema.properties.lines.items.additionalProperties",
        "open_object",
        "additionalProperties: false",
    ),
    (
        "name without namespace",
        _set("name", "search_documentation"),
        "$.name",
        "name_namespace",
        "namespace.skill_name",
    ),
    ("name with capitals", _set("name", "Docs.Search"), "$.name", "name_namespace", "namespace.skill_name"),
    (
        "write retried without idempotency",
        _both(_set("risk.effect", "write"), _set("execution.idempotent", False)),
        "$.execution.idempotent",
        "retry_needs_idempotent",
        "must declare idempotent: true",
    ),
    (
        "external retried, idempotent missing",
        _both(_set("risk.effect", "external"), _drop("execution.idempotent")),
        "$.execution.idempotent",
        "retry_needs_idempotent",
        "external skill retried up to 2 times",
    ),
    (
        "destructive without approval",
        _both(_set("risk.effect", "destructive"), _set("execution.max_attempts", 1)),
        "$.risk.approval",
        "destructive_needs_approval",
        "cannot have approval: not_required",
    ),
    (
        "timeout too long",
        _set("execution.timeout_ms", 600_000),
        "$.execution.timeout_ms",
        "timeout_out_of_bounds",
        "between 100 and 120000",
    ),
    (
        "timeout too short",
        _set("execution.timeout_ms", 5),
        "$.execution.timeout_ms",
        "timeout_out_of_bounds",
        "between 100 and 120000",
    ),
    (
        "too many attempts",
        _set("execution.max_attempts", 20),
        "$.execution.max_attempts",
        "attempts_out_of_bounds",
        "between 1 and 5",
    ),
    (
        "result limit huge",
        _set("execution.result_limit_bytes", 50_000_000),
        "$.execution.result_limit_bytes",
        "result_limit_out_of_bounds",
        "between 256 and 1048576",
    ),
    ("unknown team", _set("ownership.team", "ghosts"), "$.ownership.team", "unknown_team", "No team 'ghosts'"),
    (
        "unknown replacement",
        _set("compatibility", {"replacement_skill_id": "skl_nowhere"}),
        "$.compatibility.replacement_skill_id",
        "unknown_replacement",
        "No skill 'skl_nowhere'",
    ),
]


@pytest.mark.parametrize(("label", "mutate", "path", "code", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_manifest_gets_its_exact_error(owner_team, label, mutate, path, code, message):
    body = manifest()
    mutate(body)
    errors = validate_manifest(body)
    assert len(errors) == 1, errors
    assert errors[0]["path"] == path
    assert errors[0]["code"] == code
    assert message in errors[0]["message"]


def test_at_least_twenty_cases():
    assert len(MALFORMED) >= 20


def test_valid_manifest_has_no_errors(owner_team):
    assert validate_manifest(manifest()) == []


def test_replacement_must_be_active(owner_team):
    make_version(team=owner_team, name="docs.old_search", status="deprecated")
    errors = validate_manifest(manifest(compatibility={"replacement_skill_id": "skl_docs_old_search"}))
    assert [(e["path"], e["code"]) for e in errors] == [
        ("$.compatibility.replacement_skill_id", "replacement_not_active")
    ]


def test_version_must_be_strictly_greater(owner_team):
    previous = make_version(team=owner_team, version="1.2.0")
    errors = validate_manifest(manifest(version="1.2.0"), skill=previous.skill, previous=previous)
    assert [(e["path"], e["code"]) for e in errors] == [("$.version", "version_not_greater")]
    assert validate_manifest(manifest(version="1.2.1"), skill=previous.skill, previous=previous) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            _set("input_schema.required", ["query", "product_area"]),
            "$.input_schema.properties.product_area: field became required",
        ),
        (_drop("input_schema.properties.max_results"), "$.input_schema.properties.max_results: field removed"),
        (
            _set("input_schema.properties.max_results.type", "string"),
            "$.input_schema.properties.max_results: type integer -> string",
        ),
        (
            _set("input_schema.properties.product_area.enum", ["api", "sdk"]),
            "$.input_schema.properties.product_area: enum narrowed: removed ['cli', 'ui']",
        ),
        (
            _both(
                _set("input_schema.properties.locale", {"type": "string"}),
                _set("input_schema.required", ["query", "locale"]),
            ),
            "$.input_schema.properties.locale: new required field",
        ),
    ],
)
def test_breaking_change_without_major_bump_is_refused_with_the_list(owner_team, mutate, expected):
    previous = make_version(team=owner_team, version="1.2.0")
    body = manifest(version="1.3.0")
    mutate(body)
    errors = validate_manifest(body, skill=previous.skill, previous=previous)
    assert [(e["path"], e["code"]) for e in errors] == [("$.version", "breaking_change_needs_major")]
    assert [f"{c['path']}: {c['detail']}" for c in errors[0]["breaking_changes"]] == [expected]
    body["version"] = "2.0.0"
    assert validate_manifest(body, skill=previous.skill, previous=previous) == []


def test_compatible_changes_need_no_major_bump(owner_team):
    previous = make_version(team=owner_team, version="1.2.0")
    body = manifest(version="1.3.0")
    body["input_schema"]["properties"]["locale"] = {"type": "string", "enum": ["en", "fr"]}
    body["input_schema"]["properties"]["product_area"]["enum"].append("web")
    assert validate_manifest(body, skill=previous.skill, previous=previous) == []


DECLARED_ERRORS = [{"code": "index_offline", "meaning": "The search index is being rebuilt.", "retryable": True}]


def test_linter_passes_a_good_definition():
    assert lint_manifest(manifest(errors=DECLARED_ERRORS)) == []


def test_linter_flags_a_manifest_that_declares_no_error_codes():
    warnings = lint_manifest(manifest())
    assert [(w["path"], w["code"]) for w in warnings] == [("$.errors", "undocumented_errors")]
    assert "retryable" in warnings[0]["message"]


@pytest.mark.parametrize(
    ("errors", "path", "code"),
    [
        ([{"code": "busy", "meaning": "Try later.", "retryable": "yes"}], "$.errors[0].retryable", "schema"),
        ([{"code": "busy", "retryable": True}], "$.errors[0]", "schema"),
        ([{"code": "has space", "meaning": "Bad code.", "retryable": False}], "$.errors[0].code", "schema"),
        (DECLARED_ERRORS * 2, "$.errors[1].code", "duplicate_entry"),
    ],
)
def test_malformed_error_declarations_are_refused_with_their_path(errors, path, code):
    problems = validate_manifest(manifest(errors=errors))
    assert any(p["path"] == path and p["code"] == code and p["message"] for p in problems), problems


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (_set("description", "Fetches data from the documentation store."), "description_missing_when"),
        (
            _set("description", "Fetches data from the documentation store, use for docs questions."),
            "description_missing_side_effects",
        ),
        (_set("name", "admin.remove_user"), "name_hides_reversibility"),
        (_set("input_schema.properties", {"id": {"type": "string"}}), "name_hides_lookup_key"),
        (_set("input_schema.properties.status", {"type": "string"}), "free_form_string"),
        (_set("output_schema.properties.results.description", ""), "undocumented_result_field"),
        (
            _both(_drop("output_schema.properties.next_cursor"), _drop("input_schema.properties.max_results")),
            "no_pagination",
        ),
    ],
)
def test_linter_warnings(mutate, code):
    body = manifest()
    if code == "name_hides_lookup_key":
        body["name"] = "customer.get_user"
    mutate(body)
    assert code in [w["code"] for w in lint_manifest(body)]


def test_linter_flags_undocumented_empty_result():
    body = manifest(description="Search published product documentation. Use for API guidance. No side effects.")
    body["output_schema"] = {"type": "object", "properties": {"title": {"type": "string", "description": "Title."}}}
    assert "empty_result_undocumented" in [w["code"] for w in lint_manifest(body)]


VIEWS = {"default": "titles", "views": {"titles": ["results[].title"], "full": "*"}}
PAGES = {"cursor_field": "next_cursor", "cursor_argument": "cursor", "items": "results"}


def _paged(body: dict) -> dict:
    body["input_schema"]["properties"]["cursor"] = {"type": "string", "description": "next_cursor of a page."}
    return {**body, "output_views": copy.deepcopy(VIEWS), "pagination": dict(PAGES)}


def test_views_and_a_declared_cursor_publish(owner_team):
    body = _paged(manifest())
    assert validate_manifest(body) == []
    assert "no_pagination" not in [w["code"] for w in lint_manifest(body)]


@pytest.mark.parametrize(
    ("mutate", "path", "code"),
    [
        (_set("output_views.default", "everything"), "$.output_views.default", "unknown_default_view"),
        (_set("output_views.views.titles", ["results..title"]), "$.output_views.views.titles", "schema"),
        (_set("output_views.views.titles", "all"), "$.output_views.views.titles", "schema"),
        (
            _set("pagination.cursor_argument", "page_token"),
            "$.pagination.cursor_argument",
            "cursor_argument_undeclared",
        ),
        (_set("risk.effect", "write"), "$.pagination", "pagination_needs_read"),
    ],
)
def test_a_view_or_cursor_that_cannot_work_is_refused(owner_team, mutate, path, code):
    body = _paged(manifest())
    mutate(body)
    errors = validate_manifest(body)
    assert (errors[0]["path"], errors[0]["code"]) == (path, code), errors


def test_the_pagination_warning_points_at_next_handles():
    body = manifest()
    del body["output_schema"]["properties"]["next_cursor"], body["input_schema"]["properties"]["max_results"]
    warning = next(w for w in lint_manifest(body) if w["code"] == "no_pagination")
    assert "`pagination`" in warning["message"] and "`next` handle" in warning["message"]
