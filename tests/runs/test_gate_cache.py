"""The gate keeps grants, policies and skill statuses in process (runs/gate_cache.py) and authenticates
with the run in one query (runs/api/batch_auth.py). Each test warms those caches with a call that
succeeds, then changes the world the way an admin, an owner or an attacker would, and checks that the
very next call sees the change."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.services import revoke_agent
from policies.models import Grant
from registry.models import SkillVersion, VersionStatus
from runs.models import ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule

pytestmark = pytest.mark.django_db
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def _granted_skill(tenant, name: str, effect: str):
    version = make_skill(name, effect=effect, adapter="python:test.echo", publish=False)
    grant(tenant, "orders.*")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="test")
    return version


@pytest.fixture
def reader(acme):
    return _granted_skill(acme, "orders.echo", "read")


def _one(agent_client, run_id, call_id, name="orders.echo"):
    response = post_calls(agent_client, run_id, [call(call_id, name, {"n": call_id})])
    return response


def _warm(agent_client):
    run = start_run(agent_client)
    first = _one(agent_client, run["run_id"], "warm")
    assert first.json()["results"][0]["status"] == "ok", first.content
    return run["run_id"]


def test_grant_revoked_by_a_queryset_update_stops_the_next_call(agent_client, reader, acme):
    run_id = _warm(agent_client)
    Grant.objects.filter(tenant=acme).update(revoked_at=timezone.now())  # no service, no signal: the trigger sees it
    assert _one(agent_client, run_id, "c1").json()["results"][0]["error"]["code"] == "no_grant"


def test_grant_expiring_between_two_calls_stops_the_second(agent_client, reader, acme, monkeypatch):
    Grant.objects.filter(tenant=acme).update(expires_at=timezone.now() + timedelta(minutes=5))
    run_id = _warm(agent_client)
    later = timezone.now() + timedelta(minutes=6)
    monkeypatch.setattr(timezone, "now", lambda: later)  # nothing is written when a grant expires
    assert _one(agent_client, run_id, "c1").json()["results"][0]["error"]["code"] == "no_grant"


def test_policy_published_between_two_calls_decides_the_second(agent_client, reader, acme):
    run_id = _warm(agent_client)
    published_policy(tenant=acme, rules=[rule("no-echo", "deny", 'skill.name == "orders.echo"', "not today")])
    error = _one(agent_client, run_id, "c1").json()["results"][0]["error"]
    assert error["code"] == "denied_by_policy" and error["rule_id"].endswith("no-echo")


def test_version_retired_between_two_calls_stops_the_second(agent_client, reader):
    run_id = _warm(agent_client)
    SkillVersion.objects.filter(pk=reader.pk).update(status=VersionStatus.RETIRED)
    assert _one(agent_client, run_id, "c1").json()["results"][0]["error"]["code"] == "retired"


def test_agent_revoked_between_two_calls_is_refused_and_nothing_is_recorded(agent_client, agent_and_key, reader):
    run_id = _warm(agent_client)
    revoke_agent(agent=agent_and_key[0])
    response = _one(agent_client, run_id, "c1")
    assert response.status_code == 401 and response.json()["error"]["code"] == "revoked_key"
    assert not ToolCall.objects.filter(call_id="c1").exists()


def test_a_rolled_back_change_does_not_poison_the_cache(agent_client, reader, acme):
    """A process that saw a grant revoked inside a transaction that then rolled back must not keep
    serving that state: every bump has its own random epoch."""
    run_id = _warm(agent_client)

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        Grant.objects.filter(tenant=acme).update(revoked_at=timezone.now())
        assert _one(agent_client, run_id, "inside").json()["results"][0]["error"]["code"] == "no_grant"
        raise Undo
    assert _one(agent_client, run_id, "after").json()["results"][0]["status"] == "ok"


def test_another_agents_key_on_my_run_is_a_404_and_records_nothing(agent_client, outsider_agent_client, reader):
    run_id = _warm(agent_client)
    response = _one(outsider_agent_client, run_id, "theirs")
    assert response.status_code == 404
    assert not ToolCall.objects.filter(call_id="theirs").exists()


def test_right_lookup_wrong_secret_is_a_401(agent_client, agent_and_key, reader):
    run_id = _warm(agent_client)
    lookup = agent_and_key[1].split("_")[1]
    forged = agent_client.__class__()
    forged.credentials(HTTP_AUTHORIZATION=f"Bearer ak_{lookup}_{'x' * 43}")
    response = _one(forged, run_id, "forged")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unknown_key"
    assert not ToolCall.objects.filter(call_id="forged").exists()


def test_replayed_call_id_is_still_replayed_on_the_fast_path(agent_client, reader):
    run_id = _warm(agent_client)
    again = _one(agent_client, run_id, "warm").json()["results"][0]
    assert again["status"] == "ok" and "nothing ran again" in " ".join(again["warnings"])
    assert ToolCall.objects.filter(call_id="warm").count() == 1


def test_single_read_call_is_at_most_four_sql_statements(agent_client, reader):
    """The guard of issue 17: authenticate + run + gate state in one SELECT, then the call row, its span
    and the trace's counters. Transaction control (BEGIN, COMMIT, savepoints) is not a data statement."""
    run_id = _warm(agent_client)
    _one(agent_client, run_id, "warm-2")  # last_used_at is written at most once a minute, not here
    url = reverse("runs_api:run_calls", args=[run_id])
    with CaptureQueriesContext(connection) as queries:
        response = agent_client.post(url, {"calls": [call("c1", "orders.echo", {"n": 1})]}, format="json")
    assert response.json()["results"][0]["status"] == "ok"
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]
    assert len(statements) <= 4, "\n".join(statements)


@pytest.fixture
def writer(acme):
    return _granted_skill(acme, "orders.note", "write")


def _write(agent_client, run_id, call_id, **extra):
    return post_calls(agent_client, run_id, [call(call_id, "orders.note", {"n": call_id}, **extra)]).json()["results"]


def test_a_write_is_checked_live_in_one_statement_once_the_caches_are_warm(agent_client, writer):
    """Before a write executes, the run, its agent and the gate generation are read again in one SELECT;
    grants, policies and the version's standing come from the caches that generation keeps valid."""
    run_id = start_run(agent_client)["run_id"]
    assert _write(agent_client, run_id, "warm")[0]["status"] == "ok"
    with CaptureQueriesContext(connection) as queries:
        assert _write(agent_client, run_id, "w1")[0]["status"] == "ok"
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]
    cached_tables = ("policies_grant", "policies_policyversion", "registry_skillversion")
    assert not [s for s in statements if any(table in s for table in cached_tables)], "\n".join(statements)
    live_checks = [s for s in statements if "console_gategeneration" in s and "revoked_at" in s]
    assert len(live_checks) == 2, "\n".join(statements)  # the batch's own query, then the check before the write


def test_a_sunset_moved_into_the_past_stops_the_next_write(agent_client, writer):
    """Deprecated with a sunset next week, then an operator's bare UPDATE of sunset_at alone (the status
    column untouched) moves it into the past: the run's snapshot still says next week, the live check
    before the write must not, even with its caches warm."""
    SkillVersion.objects.filter(pk=writer.pk).update(
        status=VersionStatus.DEPRECATED, sunset_at=timezone.now() + timedelta(days=7)
    )
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="deprecated")
    run_id = start_run(agent_client)["run_id"]
    assert _write(agent_client, run_id, "warm", version="1.0.0")[0]["status"] == "ok"
    SkillVersion.objects.filter(pk=writer.pk).update(sunset_at=timezone.now() - timedelta(minutes=1))
    result = _write(agent_client, run_id, "w1", version="1.0.0")[0]
    assert result["error"]["code"] == "skill_retired", result
    assert ToolCall.objects.get(call_id="w1").status == "denied"
