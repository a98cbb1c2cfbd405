"""Owner-supplied schema patterns, attacked: a catastrophic pattern on a long agent input returns at once
(RE2, no backtracking), and a pattern RE2 cannot run is refused at publish with the path that names it."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from lib.schema_patterns import SchemaValidator
from registry.models import Skill
from registry.validation import validate_manifest
from runs.errors import Internal, ValidationFailed
from runs.validation import validate_arguments
from tests.registry.factories import manifest
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

EVIL = r"^(a+)+$"
LONG = "a" * 10_000 + "!"  # never matches: Python's re would explore 2**10000 ways to fail
GENEROUS_SECONDS = 2.0  # RE2 takes about a millisecond; Python's re takes 1.3 s at 25 characters


def _schema(**properties) -> dict:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def test_a_catastrophic_pattern_on_a_long_input_fails_fast():
    schema = _schema(code={"type": "string", "pattern": EVIL})
    started = time.monotonic()
    with pytest.raises(ValidationFailed) as refused:
        validate_arguments(skill_version_id=-1, schema=schema, version="1.0.0", name="t.x", arguments={"code": LONG})
    assert time.monotonic() - started < GENEROUS_SECONDS
    assert refused.value.extra["fields"][0]["field"] == "code"
    assert len(refused.value.message) < 500, "the 10,000 characters are not echoed back whole"
    validate_arguments(skill_version_id=-1, schema=schema, version="1.0.0", name="t.x", arguments={"code": "aaa"})


def test_catastrophic_pattern_properties_fail_fast_with_additional_properties_false():
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False}
    validator = SchemaValidator(schema)
    started = time.monotonic()
    errors = list(validator.iter_errors({LONG: 1, "a" * 40: "not an integer"}))
    assert time.monotonic() - started < GENEROUS_SECONDS
    assert {e.validator for e in errors} == {"additionalProperties", "type"}
    assert validator.is_valid({"aaaa": 3})


def test_the_gate_answers_an_agents_long_input_at_once(agent_client, acme):
    make_skill(
        "orders.lookup_code", adapter="python:test.echo", schema=_schema(code={"type": "string", "pattern": EVIL})
    )
    grant(acme, "orders.*")
    run = start_run(agent_client)
    started = time.monotonic()
    response = post_calls(
        agent_client,
        run["run_id"],
        [call("c1", "orders.lookup_code", {"code": LONG}), call("c2", "orders.lookup_code", {"code": "aaaa"})],
    )
    assert time.monotonic() - started < GENEROUS_SECONDS * 3
    first, second = response.json()["results"]
    assert first["status"] == "error" and first["error"]["class"] == "validation", first
    assert second["status"] == "ok", second


@pytest.mark.parametrize(
    ("where", "schema", "path"),
    [
        (
            "backreference",
            _schema(code={"type": "string", "pattern": r"^(ab)\1$"}),
            "$.input_schema.properties.code.pattern",
        ),
        (
            "lookahead, nested",
            _schema(address=_schema(zip={"type": "string", "pattern": r"^(?=\d)\d{5}$"})),
            "$.input_schema.properties.address.properties.zip.pattern",
        ),
        (
            "lookbehind in patternProperties",
            {"type": "object", "patternProperties": {r"(?<=x)_id$": {"type": "string"}}, "additionalProperties": False},
            "$.input_schema.patternProperties.(?<=x)_id$",
        ),
        (
            "repetition over 1000",
            _schema(pin={"type": "string", "pattern": "^[0-9]{2000}$"}),
            "$.input_schema.properties.pin.pattern",
        ),
        (
            "inside anyOf",
            _schema(tag={"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"(x)\1"}]}),
            "$.input_schema.properties.tag.anyOf[1].pattern",
        ),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_publish_with_its_path(where, schema, path):
    errors = validate_manifest(manifest(input_schema=schema))
    refusals = [e for e in errors if e["code"] == "unsupported_pattern"]
    assert [e["path"] for e in refusals] == [path], errors
    assert "RE2" in refusals[0]["message"] and "rewrite it" in refusals[0]["message"]


def test_output_schema_patterns_are_checked_too():
    body = manifest(output_schema={"type": "object", "properties": {"id": {"type": "string", "pattern": r"(a)\1"}}})
    assert [e["path"] for e in validate_manifest(body) if e["code"] == "unsupported_pattern"] == [
        "$.output_schema.properties.id.pattern"
    ]


def test_unevaluated_properties_beside_pattern_properties_is_refused():
    schema = {
        "type": "object",
        "patternProperties": {"^x_": {"type": "string"}},
        "unevaluatedProperties": False,
        "additionalProperties": False,
    }
    errors = [e for e in validate_manifest(manifest(input_schema=schema)) if e["code"] == "unsupported_pattern"]
    assert [e["path"] for e in errors] == ["$.input_schema.unevaluatedProperties"]


def test_a_catastrophic_but_linear_pattern_may_be_published(owner_team):
    """`^(a+)+$` is harmless on RE2, so it is not refused: the protection is the engine, not a blocklist."""
    assert validate_manifest(manifest(input_schema=_schema(code={"type": "string", "pattern": EVIL}))) == []


def test_the_owner_api_refuses_a_backreference_with_the_clear_error(owner):
    client = APIClient()
    client.force_authenticate(owner)
    body = manifest(input_schema=_schema(code={"type": "string", "pattern": r"^(ab)\1$"}))
    response = client.post(reverse("registry_api:skills"), {"manifest": body}, format="json")
    assert response.status_code == 400
    errors = response.json()["error"]["errors"]
    assert [(e["path"], e["code"]) for e in errors] == [
        ("$.input_schema.properties.code.pattern", "unsupported_pattern")
    ]
    assert "Backreferences" in errors[0]["message"]
    assert not Skill.objects.exists()


def test_a_version_published_before_the_check_is_refused_not_backtracked():
    schema = _schema(code={"type": "string", "pattern": r"^(a+)\1$"})
    with pytest.raises(Internal) as refused:
        validate_arguments(skill_version_id=-2, schema=schema, version="1.0.0", name="t.old", arguments={"code": LONG})
    assert refused.value.code == "unsupported_pattern"
