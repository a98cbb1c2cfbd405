"""Rotating an agent's key: both keys work in the grace period, only the new one after it ends or after an
early cut-off, on every way in; written as the holder of an old key trying to keep using it."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Agent, AgentKeyEvent
from console.services import KeyRotationRefused, create_agent, cut_off_old_key, revoke_agent, rotate_agent_key
from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db
HOUR = 3600


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _whoami(key: str):
    return _client(key).get(reverse("agent-whoami"))


@pytest.fixture
def rotated(agent_and_key, tenant_admin):
    """(agent, old key, new key) right after a rotation with the default grace period of 24 hours."""
    agent, old = agent_and_key
    agent, new = rotate_agent_key(agent=agent, by=tenant_admin)
    return agent, old, new


def test_both_keys_work_during_the_grace_period_and_only_the_new_one_after(rotated, clock):
    agent, old, new = rotated
    assert old != new and agent.previous_key_lookup == old.split("_")[1] != agent.key_lookup
    assert _whoami(old).json()["key"] == {
        "lookup": agent.previous_key_lookup,
        "replaced": True,  # the agent can tell it must switch, and by when
        "expires_at": agent.previous_key_expires_at.isoformat(),
    }
    assert _whoami(new).json()["key"] == {"lookup": agent.key_lookup, "replaced": False, "expires_at": None}
    clock.advance(23 * HOUR)
    assert _whoami(old).status_code == 200
    clock.advance(HOUR + 1)
    refused = _whoami(old)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "replaced_key"
    assert "use the agent's new key" in refused.json()["error"]["message"]
    assert _whoami(new).status_code == 200


def test_a_cut_off_old_key_is_refused_on_its_very_next_request(rotated, tenant_admin):
    agent, old, new = rotated
    assert _whoami(old).status_code == 200  # in use, and its agent row loaded a moment ago
    cut_off_old_key(agent=agent, by=tenant_admin)
    assert _whoami(old).json()["error"]["code"] == "replaced_key"
    assert _whoami(new).status_code == 200
    with pytest.raises(KeyRotationRefused, match="no old key"):
        cut_off_old_key(agent=agent, by=tenant_admin)  # twice: nothing left to cut off
    assert list(AgentKeyEvent.objects.filter(agent=agent).values_list("action", "actor__username")) == [
        ("cut_off", "admin"),
        ("rotated", "admin"),
    ]


def test_a_zero_grace_period_stops_the_old_key_at_once(agent_and_key, tenant_admin):
    agent, old = agent_and_key
    _, new = rotate_agent_key(agent=agent, by=tenant_admin, grace=timedelta(0))
    assert _whoami(old).status_code == 401 and _whoami(new).status_code == 200


def test_rotating_again_stops_the_key_still_in_its_grace_period(rotated, tenant_admin):
    """An agent never has more than two working keys: the oldest one stops with the second rotation."""
    agent, first, second = rotated
    _, third = rotate_agent_key(agent=agent, by=tenant_admin)
    assert _whoami(first).status_code == 401 and _whoami(first).json()["error"]["code"] == "unknown_key"
    assert _whoami(second).status_code == _whoami(third).status_code == 200


def test_a_revoked_agent_is_refused_with_either_key_and_cannot_be_rotated(rotated, tenant_admin):
    agent, old, new = rotated
    revoke_agent(agent=agent)
    assert _whoami(old).json()["error"]["code"] == _whoami(new).json()["error"]["code"] == "revoked_key"
    with pytest.raises(KeyRotationRefused, match="revoked"):
        rotate_agent_key(agent=agent, by=tenant_admin)


def test_a_forged_secret_with_the_old_keys_lookup_is_unknown_not_replaced(rotated, clock):
    """Only the holder of the whole old key learns that it was replaced; a guesser learns nothing."""
    _, old, _ = rotated
    forged = old[:-4] + ("AAAA" if not old.endswith("AAAA") else "BBBB")
    assert _whoami(forged).json()["error"]["code"] == "unknown_key"
    clock.advance(25 * HOUR)
    assert _whoami(forged).json()["error"]["code"] == "unknown_key"


@pytest.mark.parametrize("grace", [timedelta(seconds=-1), timedelta(days=30, seconds=1)])
def test_a_grace_period_outside_its_bounds_is_refused(agent_and_key, tenant_admin, grace):
    agent, old = agent_and_key
    with pytest.raises(KeyRotationRefused, match="between 0 and 720 hours"):
        rotate_agent_key(agent=agent, by=tenant_admin, grace=grace)
    agent.refresh_from_db()
    assert agent.previous_key_lookup is None and agent.key_matches(old)


def test_each_key_records_its_own_last_use_at_most_once_a_minute(rotated, django_assert_num_queries):
    agent, old, new = rotated
    assert _whoami(old).status_code == 200
    agent.refresh_from_db()
    assert agent.previous_key_last_used_at is not None and agent.last_used_at is None
    used = agent.previous_key_last_used_at
    with django_assert_num_queries(1):  # the lookup only: no write within the minute
        assert _whoami(old).status_code == 200
    assert _whoami(new).status_code == 200
    agent.refresh_from_db()
    assert agent.last_used_at is not None and agent.previous_key_last_used_at == used


def test_the_rotation_is_audited_with_lookups_never_secrets(rotated):
    agent, old, new = rotated
    event = AgentKeyEvent.objects.get(agent=agent)
    assert event.action == "rotated" and event.actor_label == "admin" and event.tenant_id == agent.tenant_id
    assert event.detail == {
        "new_key": f"ak_{agent.key_lookup}",
        "old_key": f"ak_{agent.previous_key_lookup}",
        "grace_seconds": 24 * HOUR,
    }
    assert old not in str(event.detail) and new not in str(event.detail)
    stored = Agent.objects.filter(pk=agent.pk).values().get()
    assert not any(isinstance(value, str) and (old in value or new in value) for value in stored.values())


def test_each_key_fetches_a_snapshot_signed_for_itself(rotated, acme, clock):
    """The SDK refuses a snapshot whose audience is not its own key: each key gets its own, and the
    old key's stops being served when the key does."""
    make_skill("orders.echo", effect="read", adapter="python:test.echo", publish=True)
    grant(acme, "orders.*")
    publish_snapshot(reason="test")
    agent, old, new = rotated
    url = reverse("registry_api:snapshot-latest")
    with_old, with_new = _client(old).get(url), _client(new).get(url)
    assert with_old.json()["snapshot"]["audience"]["key_lookup"] == old.split("_")[1]
    assert with_new.json()["snapshot"]["audience"]["key_lookup"] == new.split("_")[1]
    assert with_old["ETag"] != with_new["ETag"]
    assert _client(new).get(url, HTTP_IF_NONE_MATCH=with_old["ETag"]).status_code == 200  # never the old one's 304
    clock.advance(25 * HOUR)
    assert _client(old).get(url).status_code == 401


def test_a_new_key_never_reuses_a_lookup_still_held_as_an_old_key(rotated, acme, tenant_admin, monkeypatch):
    """Randomness is the edge here: make it repeat the old key's lookup once, and the next draw is taken."""
    agent, old, _ = rotated
    draws = iter([agent.previous_key_lookup, agent.key_lookup, "feedfacecafe"])
    monkeypatch.setattr("console.models.secrets.token_hex", lambda _n: next(draws))
    other, key = create_agent(tenant=acme, name="other-bot", role="support")
    assert other.key_lookup == "feedfacecafe" and _whoami(key).status_code == 200
    assert _whoami(old).json()["agent"] == "support-bot"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_admins_rotating_at_once_leave_exactly_two_working_keys(acme, tenant_admin):
    """The agent row is locked for the rotation: the second waits and replaces the first's new key, so the
    original key stops, the two new keys work, and both rotations are in the audit log."""
    agent, original = create_agent(tenant=acme, name="raced-bot", role="support")
    barrier, keys = threading.Barrier(2), []

    def rotate() -> None:
        try:
            barrier.wait(timeout=5)
            keys.append(rotate_agent_key(agent=Agent.objects.get(pk=agent.pk), by=tenant_admin)[1])
        finally:
            connection.close()

    threads = [threading.Thread(target=rotate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(keys) == 2
    agent.refresh_from_db()
    assert {agent.key_lookup, agent.previous_key_lookup} == {key.split("_")[1] for key in keys}
    assert all(_whoami(key).status_code == 200 for key in keys) and _whoami(original).status_code == 401
    assert AgentKeyEvent.objects.filter(agent=agent, action="rotated").count() == 2
