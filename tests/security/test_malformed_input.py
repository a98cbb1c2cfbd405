"""Malformed input is a 4xx that says what is wrong, never a 500 (the review's defect 8).

Each test is the attacker's request from the review: a NUL in a path, a query parameter or a form field
(PostgreSQL refuses NUL in text, so these were 500s there), a lone surrogate, an id of 10**40, a body past
DATA_UPLOAD_MAX_MEMORY_SIZE, and JSON nested 1,000 deep. test_url_walk.py sends the same values to every
route; these pin the answers' shape.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse

from lib.bounded_json import MAX_JSON_DEPTH
from tests.security.world import World, _call, _pipeline, _span, build_world

HUGE = 10**40


@pytest.fixture
def world(db) -> World:
    return build_world()


def _person(world: World) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(world.acme_user)
    return client


def _agent(world: World) -> Client:
    return Client(raise_request_exception=False, headers={"Authorization": f"Bearer {world.acme_agent_key}"})


def _assert_api_error(response, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.content[:300]
    error = response.json()["error"]
    assert error["class"] == "validation" and error["code"] == code, error
    for word in words:
        assert word in error["message"], error


def test_a_nul_in_a_path_or_a_query_parameter_of_the_api_is_a_400(world):
    person, agent = _person(world), _agent(world)
    pipeline = _pipeline(world)
    call = _call(world)
    attempts = [
        (person, "get", "/api/v1/approvals?tenant=%00"),
        (person, "get", "/api/v1/skills?namespace=%00"),
        (person, "get", "/api/v1/skills/%00"),
        (agent, "get", f"/api/v1/runs/{pipeline['run_id']}/pipelines/%00"),
        (agent, "post", f"/api/v1/runs/{call.run_id}/calls/%00/result"),
        (Client(raise_request_exception=False), "post", "/api/v1/jobs/%00/complete"),
    ]
    for client, method, url in attempts:
        response = getattr(client, method)(url)
        _assert_api_error(response, 400, "bad_request", "NUL")


def test_a_nul_in_a_console_path_query_or_form_field_is_a_400_page(world):
    person = _person(world)
    for response in (
        person.get("/runs/?tenant=%00"),
        person.get("/registry/skills/%00/"),
        person.post(reverse("console:switch_tenant"), {"tenant": "acme\x00"}),
    ):
        assert response.status_code == 400
        assert b"NUL" in response.content and response["Content-Type"].startswith("text/html")


async def test_a_raw_lone_surrogate_in_the_path_is_a_400_through_the_asgi_app():
    """An ASGI server may hand Django a path holding U+D800 itself; PostgreSQL cannot store it."""
    from airlock.asgi import application

    communicator = HttpCommunicator(application, "GET", "/api/v1/skills/\ud800")
    response = await communicator.get_response()
    assert response["status"] == 400
    assert json.loads(response["body"])["error"]["code"] == "bad_request"


def test_an_id_past_any_bigint_is_the_same_404_as_a_missing_one(world):
    person = _person(world)
    span, _ = _span(world)
    for url in (
        f"/traces/{span.trace_id}/calls/{HUGE}/why/",
        f"/api/v1/approvals/{HUGE}",
        f"/approvals/{HUGE}/",
        f"/policies/{HUGE}/",
    ):
        assert person.get(url).status_code == 404, url


def _oversized() -> bytes:
    return b'{"name": "' + b"x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b'"}'


def test_an_api_body_past_the_upload_limit_is_a_413_naming_the_limit(world):
    agent, person = _agent(world), _person(world)
    limit = str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    for client, url in (
        (agent, reverse("runs_api:run_create")),
        (person, reverse("registry_api:skills")),
        (person, reverse("policies_api:tenant_grants", kwargs={"tenant_slug": "acme"})),
    ):
        _assert_api_error(client.post(url, _oversized(), content_type="application/json"), 413, "body_too_large", limit)


def test_a_console_form_past_the_upload_limit_is_a_413_page_naming_the_limit(world):
    body = "tenant=acme&next=" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = _person(world).post(
        reverse("console:switch_tenant"), body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 413
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE).encode() in response.content


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_otlp_and_span_batches_nested_1000_deep_are_a_400(world):
    agent = _agent(world)
    for url in (reverse("otlp:traces"), reverse("traces_api:span_batch")):
        response = agent.post(url, _nested(1000), content_type="application/json")
        _assert_api_error(response, 400, "bad_json", "nested too deeply")


def test_otlp_attributes_nested_past_the_limit_are_a_400_not_a_crash_in_redaction(world):
    """Shallow enough for json.loads, too deep for what walks the attributes after it."""
    value: dict = {"stringValue": "x"}
    for _ in range(MAX_JSON_DEPTH):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    span = {"traceId": "1" * 32, "spanId": "2" * 16, "name": "n", "attributes": [{"key": "deep", "value": value}]}
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    response = _agent(world).post(reverse("otlp:traces"), json.dumps(body), content_type="application/json")
    _assert_api_error(response, 400, "bad_json", "nested too deeply")


def test_a_drf_body_nested_past_the_limit_is_a_400(world):
    manifest = {"name": "acme.deep", "input_schema": json.loads(_nested(MAX_JSON_DEPTH + 1))}
    response = _person(world).post(reverse("registry_api:skills"), manifest, content_type="application/json")
    _assert_api_error(response, 400, "parse_error", "nested too deeply")


def test_an_agent_key_opens_the_api_docs(world):
    """The docs page's layout read the agent as a person (a 500 for every agent)."""
    assert _agent(world).get(reverse("api-docs")).status_code == 200


@pytest.mark.parametrize("path", ["/ws/nowhere/", "/ws/approvals/\x00", "/ws/approvals/\ud800"])
async def test_a_socket_to_an_unknown_path_is_refused_not_a_crash(path):
    from airlock.asgi import application

    socket = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver"), (b"host", b"testserver")]
    )
    connected, _ = await socket.connect()
    assert not connected
