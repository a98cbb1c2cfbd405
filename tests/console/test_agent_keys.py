"""API key authentication: each way a key can be wrong gets 401 and says which."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent, revoke_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def whoami_url():
    return reverse("agent-whoami")


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "missing_key"),
        ("Token abc", "malformed_key"),
        ("Bearer", "malformed_key"),
        ("Bearer not-a-key", "malformed_key"),
        ("Bearer ak_123456789012_" + "x" * 43, "unknown_key"),
    ],
)
def test_bad_keys_get_401_naming_the_problem(acme, whoami_url, header, code):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(whoami_url)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["class"] == "authentication"


def test_revoked_key_gets_401(acme, whoami_url):
    agent, key = create_agent(tenant=acme, name="bot", role="support")
    revoke_agent(agent=agent)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get(whoami_url)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "revoked_key"


def test_a_key_with_a_known_lookup_but_wrong_secret_is_unknown(acme, whoami_url):
    agent, key = create_agent(tenant=acme, name="bot", role="support")
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert client.get(whoami_url).json()["error"]["code"] == "unknown_key"


def test_valid_key_authenticates_and_records_last_use(acme, whoami_url):
    agent, key = create_agent(tenant=acme, name="bot", role="support")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get(whoami_url)
    assert response.status_code == 200
    assert response.json() == {
        "agent": "bot",
        "tenant": "acme",
        "role": "support",
        "key": {"lookup": agent.key_lookup, "replaced": False, "expires_at": None},
    }
    agent.refresh_from_db()
    assert agent.last_used_at is not None


def test_key_is_stored_only_as_a_hash(acme):
    agent, key = create_agent(tenant=acme, name="bot", role="support")
    agent.refresh_from_db()
    assert key not in (agent.key_hash, agent.key_lookup)
    assert key.split("_", 2)[2] not in agent.key_hash
