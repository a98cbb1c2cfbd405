"""The gate side of client-executed skills: `POST /api/v1/runs/{run_id}/calls/{call_id}/result`."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent
from runs import client_exec
from runs.models import RunEvent, ToolCall
from tests.runs.conftest import post_calls, start_run

NOTES = {"call_id": "n1", "name": "workspace.read_local_notes", "arguments": {"customer_id": "c-100"}}


@pytest.fixture
def issued(catalog, agent_client):
    run = start_run(agent_client)
    [result] = post_calls(agent_client, run["run_id"], [NOTES]).json()["results"]
    assert result["status"] == "execute_locally", result
    return run["run_id"], result


def report(client, run_id: str, call_id: str, payload: dict):
    return client.post(reverse("runs_api:client_result", args=[run_id, call_id]), payload, format="json")


def test_the_gate_answers_execute_locally_with_a_bound_token(issued):
    run_id, result = issued
    assert result["skill"]["name"] == "workspace.read_local_notes" and result["expires_at"]
    call = ToolCall.objects.get(run_id=run_id, call_id="n1")
    assert call.status == "executing" and result["arguments_sha256"] == call.arguments_sha256


def test_a_reported_result_is_shaped_recorded_and_announced(issued, agent_client):
    run_id, result = issued
    response = report(agent_client, run_id, "n1", {"token": result["token"], "content": {"notes": ["VIP"]}})
    assert response.status_code == 200
    assert response.json()["status"] == "ok" and response.json()["content"] == {"notes": ["VIP"]}
    call = ToolCall.objects.get(run_id=run_id, call_id="n1")
    assert call.status == "succeeded" and call.result["content"] == {"notes": ["VIP"]}
    event = RunEvent.objects.get(run_id=run_id, kind="call.completed")
    assert event.payload["call_id"] == "n1" and event.payload["result"]["status"] == "ok"


def test_an_error_from_the_agent_is_recorded_as_the_calls_failure(issued, agent_client):
    run_id, result = issued
    response = report(agent_client, run_id, "n1", {"token": result["token"], "error": {"message": "disk full"}})
    assert response.json()["error"]["message"] == "disk full" and response.json()["is_error"]
    assert ToolCall.objects.get(run_id=run_id, call_id="n1").status == "failed"


def test_reporting_the_same_result_again_is_idempotent_but_a_different_one_is_refused(issued, agent_client):
    run_id, result = issued
    first = report(agent_client, run_id, "n1", {"token": result["token"], "content": {"notes": []}})
    again = report(agent_client, run_id, "n1", {"token": result["token"], "content": {"notes": []}})
    assert again.status_code == 200 and again.json() == first.json()
    other = report(agent_client, run_id, "n1", {"token": result["token"], "content": {"notes": ["changed"]}})
    assert other.status_code == 409 and other.json()["error"]["code"] == "already_reported"
    assert RunEvent.objects.filter(run_id=run_id, kind="call.completed").count() == 1


def test_a_forged_or_misdirected_token_is_refused(issued, agent_client, catalog):
    run_id, result = issued
    forged = result["token"][:-4] + "0000"
    assert report(agent_client, run_id, "n1", {"token": forged, "content": {}}).status_code == 403
    [other] = post_calls(agent_client, run_id, [{**NOTES, "call_id": "n2"}]).json()["results"]
    misdirected = report(agent_client, run_id, "n2", {"token": result["token"], "content": {}})
    assert misdirected.status_code == 403 and misdirected.json()["error"]["code"] == "token_mismatch"
    assert ToolCall.objects.get(run_id=run_id, call_id="n2").status == "executing"
    assert other["token"] != result["token"]


def test_an_expired_token_is_refused(issued, agent_client, monkeypatch):
    run_id, result = issued
    real_time = client_exec.time.time
    monkeypatch.setattr(client_exec.time, "time", lambda: real_time() + client_exec.TOKEN_TTL_SECONDS + 1)
    response = report(agent_client, run_id, "n1", {"token": result["token"], "content": {}})
    assert response.status_code == 410 and response.json()["error"]["class"] == "expired"


def test_wrong_method_missing_body_outsider_and_people_are_refused(
    issued, agent_client, outsider_agent_client, acme, approver, client
):
    run_id, result = issued
    url = reverse("runs_api:client_result", args=[run_id, "n1"])
    assert agent_client.get(url).status_code == 405
    assert report(agent_client, run_id, "n1", {"content": {}}).status_code == 400
    assert report(outsider_agent_client, run_id, "n1", {"token": result["token"], "content": {}}).status_code == 404
    _, sibling_key = create_agent(tenant=acme, name="other-bot", role="support")
    sibling = APIClient()
    sibling.credentials(HTTP_AUTHORIZATION=f"Bearer {sibling_key}")
    assert report(sibling, run_id, "n1", {"token": result["token"], "content": {}}).status_code == 404
    client.force_login(approver)
    assert client.post(url, {"token": result["token"], "content": {}}, content_type="application/json").status_code in (
        401,
        403,
    )
    assert ToolCall.objects.get(run_id=run_id, call_id="n1").status == "executing"
