"""An agent reaches only its own runs (`Run.objects.of_agent`, the one rule), through every endpoint that
takes a run id: attacked by an agent of another tenant and by another agent of the same tenant, each
holding the victim's run id. Each must get exactly the answer a run that does not exist gets, and change
nothing."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent
from mcp_gateway import calls, catalog
from reliability.models import Pipeline
from runs.models import Run, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db
MISSING = "00000000-0000-4000-8000-000000000000"

ENDPOINTS = {
    "run_detail": lambda c, run_id: c.get(reverse("runs_api:run_detail", args=[run_id])),
    "run_calls": lambda c, run_id: post_calls(c, run_id, [call("theirs", "orders.echo", {"n": 1})]),
    "run_finish": lambda c, run_id: c.post(
        reverse("runs_api:run_finish", args=[run_id]), {"status": "cancelled"}, format="json"
    ),
    "run_events": lambda c, run_id: c.get(reverse("runs_api:run_events", args=[run_id]), {"wait": "0"}),
    "tools": lambda c, run_id: c.get(reverse("runs_api:tools"), {"run_id": run_id}),
    "client_result": lambda c, run_id: c.post(
        reverse("runs_api:client_result", args=[run_id, "warm"]), {"status": "ok", "result": {}}, format="json"
    ),
    "pipeline_submit": lambda c, run_id: c.post(
        reverse("reliability_api:pipeline_submit", args=[run_id]),
        {"pipeline_id": "theirs", "steps": [{"step_id": "s1", "name": "orders.echo", "arguments": {}}]},
        format="json",
    ),
    "pipeline_detail": lambda c, run_id: c.get(reverse("reliability_api:pipeline_detail", args=[run_id, "p1"])),
}


@pytest.fixture
def reader(acme):
    version = make_skill("orders.echo", effect="read", adapter="python:test.echo", publish=True)
    grant(acme, "orders.*")
    return version


@pytest.fixture
def sibling_agent_client(acme) -> APIClient:
    """Another agent of the victim's own tenant, with the same role."""
    _, key = create_agent(tenant=acme, name="sibling-bot", role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture(params=["agent_of_another_tenant", "other_agent_of_the_same_tenant"])
def attacker(request, outsider_agent_client, sibling_agent_client) -> APIClient:
    return outsider_agent_client if request.param == "agent_of_another_tenant" else sibling_agent_client


def _state() -> list:
    return [
        list(Run.objects.order_by("pk").values_list("pk", "status", "status_reason", "tainted")),
        list(ToolCall.objects.order_by("pk").values_list("pk", "status")),
        list(Pipeline.objects.values_list("pk", flat=True)),
    ]


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_another_agents_run_reads_like_a_missing_one_and_stays_untouched(endpoint, attacker, agent_client, reader):
    send = ENDPOINTS[endpoint]
    run_id = start_run(agent_client)["run_id"]
    assert post_calls(agent_client, run_id, [call("warm", "orders.echo", {"n": 0})]).status_code == 200
    before = _state()

    theirs, missing = send(attacker, run_id), send(attacker, MISSING)

    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert _state() == before
    own = send(agent_client, run_id)  # the victim's own key still reaches it
    assert (own.status_code, own.json()) != (missing.status_code, missing.json())


def test_an_mcp_call_naming_another_agents_run_is_refused_and_records_nothing(agent_and_key, acme, globex, reader):
    """The MCP gateway's run lookups (mcp_gateway/calls.py, catalog.py) take the same rule: a session's run
    id that is not its agent's (another tenant's or a sibling's) is a gone run, and lists no tools."""
    victim = agent_and_key[0]
    run = Run.objects.get(pk=start_run(_client_for(agent_and_key[1]))["run_id"])
    for attacker_agent in (
        create_agent(tenant=globex, name="globex-bot", role="support")[0],
        create_agent(tenant=acme, name="sibling-bot", role="support")[0],
    ):
        theirs = calls.propose_call(agent=attacker_agent, run_id=run.pk, call=call("theirs", "orders.echo", {}))
        missing = calls.propose_call(
            agent=attacker_agent, run_id=uuid.UUID(MISSING), call=call("theirs", "orders.echo", {})
        )
        assert theirs == missing and theirs["status"] == "error"
        listed = catalog.mcp_entries(attacker_agent, run.pk)
        assert listed == catalog.mcp_entries(attacker_agent, uuid.UUID(MISSING))
        assert "orders.echo" not in {entry["name"] for entry in listed}
    assert not ToolCall.objects.filter(call_id="theirs").exists()
    assert "orders.echo" in {entry["name"] for entry in catalog.mcp_entries(victim, run.pk)}


def test_a_run_whose_tenant_is_not_its_agents_is_nobodys(agent_and_key, acme, globex, reader):
    """A row that names an agent of one tenant and another tenant (a bug or a hand edit) is reached by no
    key: neither the agent's nor any agent's of the tenant it names."""
    agent, key = agent_and_key
    run = Run.objects.get(pk=start_run(_client_for(key))["run_id"])
    Run.objects.filter(pk=run.pk).update(tenant=globex)
    globex_agent = create_agent(tenant=globex, name="globex-bot", role="support")[0]
    assert not Run.objects.of_agent(agent).filter(pk=run.pk).exists()
    assert not Run.objects.of_agent(globex_agent).filter(pk=run.pk).exists()
    assert not Run.objects.of_agent_key(agent.key_lookup).filter(pk=run.pk).exists()
    assert post_calls(_client_for(key), str(run.pk), [call("c1", "orders.echo", {})]).status_code == 404


def _client_for(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client
