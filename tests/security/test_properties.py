"""Property-based tests (hypothesis) for the three validators attackers feed: manifests, arguments
and the redaction applied before anything is stored."""

from __future__ import annotations

import copy
import json
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lib.canonical import canonical_json
from registry.validation import validate_manifest
from runs.errors import ValidationFailed
from runs.validation import clear_cache, validate_arguments
from traces.redaction import redact

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=True) | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)


def _valid_manifest() -> dict:
    return {
        "skill_id": "skl_prop_refund",
        "name": "billing.create_refund",
        "version": "1.0.0",
        "description": "Create a refund for one order. Sends money back to the customer; use it only after the "
        "order was checked. Cannot be undone.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["order_id"],
            "properties": {"order_id": {"type": "string", "description": "The order."}},
        },
        "output_schema": {"type": "object", "properties": {"refund_id": {"type": "string"}}},
        "risk": {"effect": "external", "data_classification": "internal", "approval": "required"},
        "permissions": {"allowed_agent_roles": ["support"], "allowed_tenants": ["*"]},
        "execution": {
            "adapter": "python:demo.create_refund",
            "timeout_ms": 5000,
            "max_attempts": 1,
            "result_limit_bytes": 16384,
        },
        "ownership": {"team": "support-tools"},
    }


@pytest.fixture
def team(db):
    from console.models import Team

    return Team.objects.get_or_create(slug="support-tools", defaults={"name": "Support tools"})[0]


def test_the_reference_manifest_is_valid(team):
    assert validate_manifest(_valid_manifest()) == []


@PROPERTY_SETTINGS
@given(value=json_values)
def test_manifest_validation_never_raises_and_always_locates_problems(team, value):
    for candidate in (value, {**_valid_manifest(), "input_schema": value}, {**_valid_manifest(), "risk": value}):
        errors = validate_manifest(candidate)
        assert isinstance(errors, list)
        assert all(e["path"].startswith("$") and e["code"] and e["message"] for e in errors)


FIELDS = [
    ("risk", "effect"),
    ("risk", "approval"),
    ("risk", "data_classification"),
    ("execution", "max_attempts"),
    ("execution", "timeout_ms"),
    ("execution", "adapter"),
    ("execution", "idempotent"),
    ("ownership", "team"),
    ("permissions", "allowed_tenants"),
    ("input_schema", "properties"),
    ("input_schema", "required"),
    ("output_schema", "properties"),
    (None, "name"),
    (None, "version"),
    (None, "skill_id"),
]


@PROPERTY_SETTINGS
@given(field=st.sampled_from(FIELDS), junk=json_values)
def test_junk_in_any_known_field_is_reported_not_raised(team, field, junk):
    manifest = _valid_manifest()
    section, key = field
    (manifest[section] if section else manifest)[key] = junk
    errors = validate_manifest(manifest)
    assert all(e["path"].startswith("$") for e in errors)


REQUIRED = ["skill_id", "name", "version", "description", "input_schema", "risk", "execution", "ownership"]


@PROPERTY_SETTINGS
@given(key=st.sampled_from(REQUIRED), junk=st.none() | st.booleans() | st.integers() | st.floats())
def test_a_manifest_missing_or_mangling_a_required_field_is_refused(team, key, junk):
    missing = _valid_manifest()
    del missing[key]
    assert validate_manifest(missing), f"a manifest without {key} was accepted"
    mangled = _valid_manifest()
    mangled[key] = junk
    assert validate_manifest(mangled), f"a manifest with {key}={junk!r} was accepted"


@PROPERTY_SETTINGS
@given(effect=st.sampled_from(["write", "external", "destructive"]), attempts=st.integers(2, 5))
def test_risky_manifests_cannot_opt_out_of_safety(team, effect, attempts):
    retried = _valid_manifest()
    retried["risk"]["effect"] = effect
    retried["execution"]["max_attempts"] = attempts
    assert any(e["code"] == "retry_needs_idempotent" for e in validate_manifest(retried))
    unapproved = _valid_manifest()
    unapproved["risk"].update(effect="destructive", approval="not_required")
    assert any(e["code"] == "destructive_needs_approval" for e in validate_manifest(unapproved))


@PROPERTY_SETTINGS
@given(path=st.lists(st.sampled_from(["properties", "order_id", "items", "x"]), min_size=0, max_size=3))
def test_every_open_object_in_the_input_schema_is_refused(team, path):
    manifest = _valid_manifest()
    nested = {"type": "object", "properties": {"a": {"type": "string"}}}  # no additionalProperties: false
    manifest["input_schema"]["properties"]["nested"] = nested
    assert any(e["code"] == "open_object" for e in validate_manifest(manifest))


# --- arguments -------------------------------------------------------------------------------------

FIELD_TYPES = {"string": st.text(max_size=20), "integer": st.integers(-(10**6), 10**6), "boolean": st.booleans()}
FRACTIONS = st.floats(0.5, 9.5).filter(lambda f: not f.is_integer())  # 1.0 is a valid JSON Schema integer
WRONG = {
    "string": st.integers() | st.booleans() | st.none(),
    "integer": st.text(max_size=5) | FRACTIONS,
    "boolean": st.integers(2, 9) | st.text(max_size=5),
}


@st.composite
def schema_and_arguments(draw):
    names = draw(st.lists(st.text(string.ascii_lowercase, min_size=1, max_size=8), min_size=1, max_size=5, unique=True))
    types = {name: draw(st.sampled_from(sorted(FIELD_TYPES))) for name in names}
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": names,
        "properties": {name: {"type": kind} for name, kind in types.items()},
    }
    arguments = {name: draw(FIELD_TYPES[kind]) for name, kind in types.items()}
    return schema, types, arguments


@PROPERTY_SETTINGS
@given(case=schema_and_arguments(), data=st.data())
def test_arguments_of_the_right_shape_pass_and_one_wrong_field_is_named(case, data):
    clear_cache()
    schema, types, arguments = case
    validate_arguments(skill_version_id=1, schema=schema, version="1.0.0", name="t.s", arguments=arguments)
    victim = data.draw(st.sampled_from(sorted(types)))
    broken = {**arguments, victim: data.draw(WRONG[types[victim]])}
    with pytest.raises(ValidationFailed) as refused:
        validate_arguments(skill_version_id=1, schema=schema, version="1.0.0", name="t.s", arguments=broken)
    assert victim in [f["field"] for f in refused.value.extra["fields"]]
    extra = {**arguments, "__proto__": 1}
    with pytest.raises(ValidationFailed):
        validate_arguments(skill_version_id=1, schema=schema, version="1.0.0", name="t.s", arguments=extra)


@PROPERTY_SETTINGS
@given(case=schema_and_arguments(), arguments=json_values)
def test_argument_validation_only_ever_raises_validation_failed(case, arguments):
    schema = case[0]
    try:
        validate_arguments(skill_version_id=2, schema=schema, version="1.0.0", name="t.s", arguments=arguments)
    except ValidationFailed as exc:
        assert exc.extra["fields"]


def test_a_reused_version_id_never_validates_against_the_old_schema():
    clear_cache()
    strict = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
    validate_arguments(skill_version_id=3, schema=strict, version="1", name="t.s", arguments={"n": 1})
    stricter = copy.deepcopy(strict)
    stricter["properties"]["n"]["maximum"] = 0
    with pytest.raises(ValidationFailed):
        validate_arguments(skill_version_id=3, schema=stricter, version="2", name="t.s", arguments={"n": 1})


# --- redaction ------------------------------------------------------------------------------------

SECRET_BODY = st.text(string.ascii_letters + string.digits, min_size=20, max_size=32)
secrets_st = st.one_of(
    SECRET_BODY.map(lambda s: f"sk_live_{s}"),
    SECRET_BODY.map(lambda s: f"ghp_{s}"),
    SECRET_BODY.map(lambda s: f"ak_{s}"),
    SECRET_BODY.map(lambda s: f"pat_{s}"),
    st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(lambda s: f"AKIA{s}"),
    SECRET_BODY.map(lambda s: f"sk-proj-{s}"),
    SECRET_BODY.map(lambda s: f"xoxb-{s}"),
    st.tuples(SECRET_BODY, SECRET_BODY, SECRET_BODY).map(lambda p: f"eyJ{p[0]}.{p[1]}.{p[2]}"),
)
filler = st.text(string.ascii_letters + " .,:;!?", max_size=20).map(lambda s: f" {s} ")


@st.composite
def nested_with(draw, secret: str):
    """A JSON value with the secret somewhere inside a string, at some depth."""
    text = draw(filler) + secret + draw(filler)
    value: object = text
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            value = [draw(json_scalars), value]
        else:
            value = {"f_" + draw(st.text(string.ascii_lowercase, max_size=8)): value, "k": draw(json_scalars)}
    return value


@PROPERTY_SETTINGS
@given(data=st.data(), secret=secrets_st)
def test_a_secret_anywhere_in_a_payload_never_survives_redaction(data, secret):
    payload = data.draw(nested_with(secret))
    stored = json.dumps(redact(payload), ensure_ascii=False)
    assert secret not in stored
    assert "[redacted:" in stored


@PROPERTY_SETTINGS
@given(
    key=st.sampled_from(
        ["password", "api_key", "token", "Authorization", "client_secret", "cookie", "config.private_key"]
    ),
    value=st.text(string.ascii_letters + string.digits, min_size=8, max_size=40).filter(
        lambda v: any(c not in string.hexdigits for c in v) and v not in '"redacted"secret_key"sensitive"'
    ),
    depth=st.integers(0, 3),
)
def test_values_under_credential_keys_are_replaced(key, value, depth):
    # (a value spelling the marker's own words, such as "redacted", would be found in the marker, and one
    # spelling its own key, such as "password", in the key that stays)
    assume(value not in key and value not in "level0level1level2")
    payload: object = {key: value}
    for level in range(depth):
        payload = {f"level{level}": payload}
    stored = canonical_json(redact(payload)).decode()
    assert value not in stored


@PROPERTY_SETTINGS
@given(value=json_values, classification=st.sampled_from(["public", "internal", "confidential", "restricted"]))
def test_redaction_never_raises_and_returns_storable_json(value, classification):
    stored = redact(value, data_classification=classification)
    json.dumps(stored, allow_nan=False)  # storable in a JSONField on PostgreSQL (no NaN, no Infinity)


@PROPERTY_SETTINGS
@given(value=json_values, secret=secrets_st)
def test_confidential_payloads_keep_nothing_but_a_hash_and_a_masked_preview(value, secret):
    stored = redact({"v": value, "s": secret}, data_classification="confidential")
    assert set(stored) == {"redacted", "reason", "sha256", "preview"}
    assert secret not in json.dumps(stored)


MARKER_TEXT = '{"card": {"redacted": true, "reason": "sensitive", "sha256": "", "preview": ""}}'


@PROPERTY_SETTINGS
@given(value=st.text(min_size=3, max_size=40))
def test_schema_marked_sensitive_fields_are_hashed(value):
    schema = {"type": "object", "properties": {"card": {"type": "string", "writeOnly": True}}}
    # A value that could be part of the marker itself ("tru", a run of hex digits) proves nothing.
    assume(any(c not in string.hexdigits for c in value) and value not in MARKER_TEXT)
    stored = redact({"card": value}, schema=schema)
    assert stored["card"]["redacted"] is True
    assert value not in json.dumps(stored, ensure_ascii=False)
