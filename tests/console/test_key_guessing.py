"""An attacker guessing API keys from one address, beside an agent whose valid key comes from that address too
(a shared NAT or egress proxy): the guesser is slowed down everywhere, the valid key never is."""

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_personal_token
from tests.approvals.factories import make_run

pytestmark = pytest.mark.django_db

SHARED_ADDRESS = "203.0.113.77"
LIMIT = 30


@pytest.fixture(autouse=True)
def limit(settings):
    settings.AIRLOCK_BAD_KEYS_PER_MINUTE = LIMIT


@pytest.fixture(autouse=True)
def same_minute(clock):
    """Counters are per fixed minute: start each test one second into a window of Airlock's clock
    (lib/clock.py), so that no test straddles a window boundary."""
    clock.advance(60 - clock.time() % 60 + 1)


def _client(key: str, addr: str = SHARED_ADDRESS) -> APIClient:
    client = APIClient(REMOTE_ADDR=addr)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _wrong_agent_key(i: int) -> str:
    return f"ak_{i:012d}_{'x' * 40}"


def _guess(times: int, addr: str = SHARED_ADDRESS) -> list[int]:
    return [_client(_wrong_agent_key(i), addr).get(reverse("runs_api:tools")).status_code for i in range(times)]


def _endpoints(run_id) -> dict:
    """One request per kind of endpoint: DRF views, the OTLP receiver and the long poll are separate code."""
    otlp = json.dumps({"resourceSpans": []}).encode()
    return {
        "run create": lambda c: c.post(reverse("runs_api:run_create"), {"end_user": "u"}, format="json"),
        "skills": lambda c: c.get(reverse("runs_api:tools")),
        "otlp": lambda c: c.post(reverse("otlp:traces"), data=otlp, content_type="application/json"),
        "events long poll": lambda c: c.get(reverse("runs_api:run_events", args=[run_id]), {"wait": "0"}),
        "approver api": lambda c: c.get(reverse("approvals_api:approval_list")),
    }


def test_the_guesser_gets_429_with_retry_after_everywhere_and_the_valid_key_still_works(
    acme, agent, agent_and_key, approver
):
    assert _guess(LIMIT) == [401] * LIMIT
    run = make_run(tenant=acme, agent=agent)
    guesser = _client(_wrong_agent_key(999))
    for name, call in _endpoints(run.pk).items():
        refused = call(guesser)
        assert refused.status_code == 429, name
        assert 1 <= int(refused["Retry-After"]) <= 60, name
        error = refused.json()["error"]  # beside OTLP's google.rpc.Status code and message on /v1/traces
        assert error["code"] == "too_many_bad_keys" and error["class"] == "rate_limited", name

    agent_from_same_address = _client(agent_and_key[1])
    endpoints = _endpoints(run.pk)
    assert endpoints["run create"](agent_from_same_address).status_code == 201
    assert endpoints["skills"](agent_from_same_address).status_code == 200
    assert endpoints["otlp"](agent_from_same_address).status_code == 200
    assert endpoints["events long poll"](agent_from_same_address).status_code == 200
    _, pat = create_personal_token(user=approver, name="bot")
    assert endpoints["approver api"](_client(pat)).status_code == 200


def test_guessing_the_secret_of_a_known_key_from_many_addresses_is_limited_but_the_key_is_not(agent, agent_and_key):
    lookup = agent_and_key[1].split("_")[1]  # shown in the console as ak_<lookup>_…
    statuses = [
        _client(f"ak_{lookup}_{'y' * 39}{i % 10}", addr=f"198.51.100.{i}").get(reverse("runs_api:tools")).status_code
        for i in range(LIMIT + 5)
    ]
    assert statuses[:LIMIT] == [401] * LIMIT and set(statuses[LIMIT:]) == {429}
    assert _client(agent_and_key[1], addr="198.51.100.200").get(reverse("runs_api:tools")).status_code == 200


def test_other_addresses_are_not_slowed_by_the_guesser(agent_and_key):
    _guess(LIMIT + 1)
    assert _guess(1, addr="192.0.2.1") == [401]


def test_valid_keys_are_never_counted(agent_and_key, approver):
    _, pat = create_personal_token(user=approver, name="bot")
    for _ in range(LIMIT + 5):
        assert _client(agent_and_key[1]).get(reverse("runs_api:tools")).status_code == 200
        assert _client(pat).get(reverse("approvals_api:approval_list")).status_code == 200
    assert _guess(1) == [401]
