"""A rotation on the gate's hot path (runs/api/batch_auth.py) and the ordinary one: an old key in its grace
period proposes calls into its runs, and is refused the moment the grace period ends or it is cut off;
each call's span names the key that proposed it."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent, cut_off_old_key, revoke_agent, rotate_agent_key
from registry.snapshots import publish_snapshot
from runs.models import ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill
from tests.runs.test_hot_path import TRANSACTION_CONTROL
from traces.access import owner_view
from traces.models import Span

pytestmark = pytest.mark.django_db
HOUR = 3600


@pytest.fixture
def reader(acme):
    version = make_skill("orders.echo", effect="read", adapter="python:test.echo", publish=True)
    grant(acme, "orders.*")
    publish_snapshot(reason="test")
    return version


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def rotated_mid_run(agent_and_key, tenant_admin, reader):
    """A run started with the old key, then the key rotated: (run id, old client, new client, agent)."""
    agent, old = agent_and_key
    run_id = start_run(_client(old))["run_id"]
    assert post_calls(_client(old), run_id, [call("before", "orders.echo", {"n": 0})]).status_code == 200
    agent, new = rotate_agent_key(agent=agent, by=tenant_admin)
    return run_id, _client(old), _client(new), agent


def _key_of(run_id: str, call_id: str) -> str | None:
    return Span.objects.get(call=ToolCall.objects.get(run_id=run_id, call_id=call_id)).attributes.get(
        "airlock.agent.key_lookup"
    )


def test_both_keys_propose_calls_in_the_grace_period_and_the_span_names_each(rotated_mid_run):
    run_id, old, new, agent = rotated_mid_run
    assert post_calls(old, run_id, [call("old", "orders.echo", {"n": 1})]).json()["results"][0]["status"] == "ok"
    assert post_calls(new, run_id, [call("new", "orders.echo", {"n": 2})]).json()["results"][0]["status"] == "ok"
    assert _key_of(run_id, "before") == _key_of(run_id, "old") == agent.previous_key_lookup
    assert _key_of(run_id, "new") == agent.key_lookup


def test_the_old_key_is_refused_after_its_grace_period_and_nothing_is_recorded(rotated_mid_run, clock):
    run_id, old, new, _ = rotated_mid_run
    clock.advance(24 * HOUR + 1)
    refused = post_calls(old, run_id, [call("late", "orders.echo", {"n": 1})])
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "replaced_key"
    assert not ToolCall.objects.filter(call_id="late").exists()
    assert post_calls(new, run_id, [call("new", "orders.echo", {"n": 2})]).status_code == 200


def test_a_cut_off_key_is_refused_on_the_next_batch(rotated_mid_run, tenant_admin):
    run_id, old, new, agent = rotated_mid_run
    assert post_calls(old, run_id, [call("warm", "orders.echo", {"n": 1})]).status_code == 200
    cut_off_old_key(agent=agent, by=tenant_admin)
    assert post_calls(old, run_id, [call("cut", "orders.echo", {"n": 1})]).status_code == 401
    assert not ToolCall.objects.filter(call_id="cut").exists()
    # The ordinary endpoints as well: reading and finishing the run.
    assert old.get(reverse("runs_api:run_detail", args=[run_id])).status_code == 401
    assert new.get(reverse("runs_api:run_detail", args=[run_id])).status_code == 200


def test_a_revoked_agents_both_keys_propose_nothing(rotated_mid_run):
    run_id, old, new, agent = rotated_mid_run
    revoke_agent(agent=agent)
    for client, call_id in ((old, "o"), (new, "n")):
        response = post_calls(client, run_id, [call(call_id, "orders.echo", {"n": 1})])
        assert response.status_code == 401 and response.json()["error"]["code"] == "revoked_key"
    assert not ToolCall.objects.filter(call_id__in=["o", "n"]).exists()


def test_another_agents_old_key_cannot_reach_this_run(rotated_mid_run, acme, tenant_admin):
    """The lookup of a replaced key is no way into someone else's run."""
    run_id, _, _, _ = rotated_mid_run
    other, other_old = create_agent(tenant=acme, name="other-bot", role="support")
    rotate_agent_key(agent=other, by=tenant_admin)
    response = post_calls(_client(other_old), run_id, [call("theirs", "orders.echo", {"n": 1})])
    assert response.status_code == 404 and not ToolCall.objects.filter(call_id="theirs").exists()


@pytest.mark.postgres
def test_the_old_key_in_its_grace_period_stays_on_the_two_statement_hot_path(rotated_mid_run):
    run_id, old, _, _ = rotated_mid_run
    assert post_calls(old, run_id, [call("warm", "orders.echo", {"n": 1})]).status_code == 200  # last use noted
    with CaptureQueriesContext(connection) as queries:
        response = post_calls(old, run_id, [call("c1", "orders.echo", {"n": 1})])
    assert response.json()["results"][0]["status"] == "ok"
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]
    assert len(statements) == 2, "\n".join(statements)


def test_the_trace_page_shows_members_which_key_proposed_a_call_and_hides_it_from_other_owners(
    rotated_mid_run, agent_and_key, client, viewer
):
    run_id, old, _, agent = rotated_mid_run
    post_calls(old, run_id, [call("old", "orders.echo", {"n": 1})])
    span = Span.objects.get(call=ToolCall.objects.get(run_id=run_id, call_id="old"))
    client.force_login(viewer)
    panel = client.get(reverse("traces:span", args=[span.trace_id, span.span_id])).content.decode()
    assert "airlock.agent.key_lookup" in panel and agent.previous_key_lookup in panel
    assert agent_and_key[1] not in panel  # the lookup, never the secret
    assert "airlock.agent.key_lookup" not in owner_view(span.attributes)
