"""Fuzzing the REST API from its own OpenAPI schema (schemathesis): no 500, no response that breaks
the schema. In-process against the WSGI application, with an agent key or an approver's personal
token as the operation needs, and path ids that name real objects of the caller's tenant so that
generated bodies reach the code behind the lookups. Bounded for CI: MAX_EXAMPLES per operation."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.security.world import build_world

MAX_EXAMPLES = 20
HUMAN_PREFIXES = ("/api/v1/approvals", "/api/v1/tenants", "/api/v1/grants")
HUMAN_SKILL_OPERATIONS = {("GET", "/api/v1/skills"), ("POST", "/api/v1/skills"), ("POST", "/api/v1/skills/validate")}


def _load_schema():
    """The same document /api/schema/ serves, generated without a request (no database at import)."""
    from drf_spectacular.generators import SchemaGenerator

    loaded = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    loaded.app = WSGIHandler()
    return loaded


schema = _load_schema()


@pytest.fixture
def _keep_the_test_connection():
    """The WSGI handler closes connections at request end; Django's own test client switches that off,
    and so must we, or the test's transaction goes with the first request (PostgreSQL)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_world(db, _keep_the_test_connection):
    from console.services import create_personal_token
    from tests.approvals.factories import open_request
    from tests.runs.factories import grant, make_skill, run_for

    world = build_world()
    skill = make_skill("acme.fuzzed", team=world.acme_team, status="draft", publish=False)
    grant(world.acme, "acme.*")
    approval = open_request(tenant=world.acme, agent=world.acme_agent)
    _, pat = create_personal_token(user=world.acme_user, name="fuzz")
    return {
        "key": world.acme_agent_key,
        "pat": pat,
        "ids": {
            "run_id": str(run_for(world.acme_agent).pk),
            "approval_id": approval.pk,
            "tenant_slug": world.acme.slug,
            "name": skill.skill.name,
            "version": skill.version,
            "grant_id": grant(world.acme, "docs.*").pk,
            "call_id": approval.call.call_id,
        },
    }


def _is_human(case) -> bool:
    path = case.operation.path
    return path.startswith(HUMAN_PREFIXES) or (
        path.startswith("/api/v1/skills")
        and (case.method.upper() != "GET" or "{name}" in path or (case.method.upper(), path) in HUMAN_SKILL_OPERATIONS)
        and path not in ("/api/v1/skills/search", "/api/v1/skills/manifest-schema")
    )


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_never_answers_500_nor_breaks_its_schema(case, fuzz_world):
    for name, value in fuzz_world["ids"].items():
        if case.path_parameters and name in case.path_parameters:
            case.path_parameters[name] = value
    token = fuzz_world["pat"] if _is_human(case) else fuzz_world["key"]
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
    )
    case.validate_response(response, checks=[response_schema_conformance])
