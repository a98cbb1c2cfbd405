"""The snapshot cache against an attacker, with a live Airlock (the real ASGI app on loopback).

The attacker sits between the agent and Airlock (replays genuine, validly signed responses;
swaps the public key) or writes to the agent's cache directory (restores an old cache file,
copies another agent's, plants one signed with their own key). Every snapshot they serve is
either really signed by the server or signed by their own key: nothing of the SDK is faked.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable

import httpx
import pytest
from airlock_sdk import (
    Airlock,
    ClientSkillRegistry,
    SnapshotAudienceError,
    SnapshotKeyChanged,
    SnapshotRollbackError,
    SnapshotVerificationError,
)
from airlock_sdk.canonical import canonical_json
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from console.services import create_agent
from lib import signing
from registry.snapshots import publish_snapshot

SNAPSHOT = "/api/v1/snapshots/latest"
PUBLIC_KEY = "/api/v1/snapshots/public-key"


class ManInTheMiddle(httpx.BaseTransport):
    """The real HTTP transport, recording every answer; `answer[path]` replaces the server's answer."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.captured: dict[str, list[dict]] = {}
        self.seen: list[str] = []
        self.answer: dict[str, Callable[[], dict]] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.url.path)
        forged = self.answer.get(request.url.path)
        if forged is not None:
            return httpx.Response(200, json=forged(), headers={"ETag": '"attacker"'})
        response = self.inner.handle_request(request)
        if response.status_code == 200:
            response.read()
            self.captured.setdefault(request.url.path, []).append(response.json())
            return httpx.Response(200, content=response.content, headers=response.headers)
        return response


class Attacker:
    """An Ed25519 key of the attacker's own, and snapshots signed with it."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.pem = (
            self.key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    def resign(self, genuine_body: dict, *, number_bump: int = 10) -> dict:
        body = json.loads(json.dumps(genuine_body))
        body["number"] += number_bump
        body["skills"].append(
            {
                "name": "admin.delete_user_permanently",
                "version": "9.0.0",
                "status": "active",
                "manifest": {"input_schema": {"type": "object"}},
            }
        )
        return {"snapshot": body, "signature": base64.b64encode(self.key.sign(canonical_json(body))).decode()}


@pytest.fixture
def mitm() -> ManInTheMiddle:
    return ManInTheMiddle()


@pytest.fixture
def connect(asgi_live_server, catalog, tmp_path):
    """connect(key, transport=None, cache=tmp_path/"cache", **kwargs): one agent process."""
    clients: list[Airlock] = []

    def make(key: str, transport: httpx.BaseTransport | None = None, cache=None, **kwargs) -> Airlock:
        client = Airlock(
            asgi_live_server.url,
            key,
            cache_dir=cache or tmp_path / "cache",
            retries=0,
            client_skills=ClientSkillRegistry(),
            http_client=httpx.Client(transport=transport or httpx.HTTPTransport(), timeout=30),
            **kwargs,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def _trusted(airlock: Airlock) -> dict:
    return json.loads(airlock.cache.trust.path.read_text())


# --- rollback ---------------------------------------------------------------------------------


def test_a_rolled_back_snapshot_replayed_by_the_network_is_refused(connect, agent_and_key, mitm, caplog):
    airlock = connect(agent_and_key[1], mitm)
    old = airlock.refresh_snapshot()
    genuine_old_answer = mitm.captured[SNAPSHOT][-1]  # really signed by Airlock, for this very agent
    publish_snapshot(reason="a newer catalog")
    new = airlock.refresh_snapshot()
    assert new.number == old.number + 1

    mitm.answer[SNAPSHOT] = lambda: genuine_old_answer
    with pytest.raises(SnapshotRollbackError) as refused:
        airlock.refresh_snapshot()
    assert (refused.value.number, refused.value.highest) == (old.number, new.number)
    assert airlock.cache.snapshot.number == new.number
    assert json.loads(airlock.cache.path.read_text())["number"] == new.number
    assert _trusted(airlock)["highest_number"] == new.number

    with caplog.at_level(logging.WARNING, logger="airlock_sdk"):
        airlock.tools(format="openai")  # the quiet refresh inside discovery reports it too
    assert "rollback" in caplog.text
    assert all(isinstance(exc, SnapshotRollbackError) for exc in airlock.snapshot_refusals[-2:])


def test_an_old_cache_file_restored_on_disk_is_refused(connect, agent_and_key, mitm, caplog):
    airlock = connect(agent_and_key[1])
    old = airlock.refresh_snapshot()
    old_file = airlock.cache.path.read_text()  # the attacker keeps a copy of the genuine old cache
    publish_snapshot(reason="a newer catalog")
    new = airlock.refresh_snapshot()
    assert new.number > old.number

    airlock.cache.path.write_text(old_file)
    with caplog.at_level(logging.WARNING, logger="airlock_sdk"):
        restarted = connect(agent_and_key[1], mitm)
    assert restarted.cache.snapshot is None
    [refusal] = restarted.snapshot_refusals
    assert isinstance(refusal, SnapshotRollbackError) and refusal.number == old.number
    assert "rollback" in caplog.text
    assert restarted.refresh_snapshot().number == new.number  # the live server's newest is still accepted


# --- audience ---------------------------------------------------------------------------------


@pytest.fixture(params=["same tenant, another agent", "another tenant's agent"])
def foreign_key(request, acme, globex) -> tuple[str, str]:
    if request.param == "same tenant, another agent":
        return "acme", create_agent(tenant=acme, name="billing-bot", role="billing")[1]
    return "globex", create_agent(tenant=globex, name="globex-bot", role="support")[1]


def test_another_agents_snapshot_served_by_the_network_is_refused(connect, agent_and_key, foreign_key, mitm, tmp_path):
    airlock = connect(agent_and_key[1], mitm)
    mine = airlock.refresh_snapshot()
    publish_snapshot(reason="newer, so the foreign view is not also a rollback")
    foreign_tenant, key = foreign_key
    connect(key, mitm, cache=tmp_path / "foreign-cache", trust_dir=tmp_path / "foreign-trust").refresh_snapshot()
    genuine_foreign_answer = mitm.captured[SNAPSHOT][-1]  # really signed by Airlock, for the other agent
    assert genuine_foreign_answer["snapshot"]["audience"]["tenant"] == foreign_tenant
    assert genuine_foreign_answer["snapshot"]["number"] > mine.number

    mitm.answer[SNAPSHOT] = lambda: genuine_foreign_answer
    with pytest.raises(SnapshotAudienceError) as refused:
        airlock.refresh_snapshot()
    assert refused.value.found["key_lookup"] != refused.value.expected["key_lookup"]
    assert airlock.cache.snapshot.signature == mine.signature
    assert airlock.snapshot_refusals == [refused.value]


def test_another_agents_cache_file_copied_into_this_agents_cache_is_refused(
    connect, agent_and_key, foreign_key, tmp_path
):
    _, key = foreign_key
    foreign = connect(key, cache=tmp_path / "foreign-cache", trust_dir=tmp_path / "foreign-trust")
    foreign.refresh_snapshot()
    airlock = connect(agent_and_key[1])
    airlock.refresh_snapshot()

    airlock.cache.path.write_text(foreign.cache.path.read_text())
    restarted = connect(agent_and_key[1])
    assert restarted.cache.snapshot is None
    [refusal] = restarted.snapshot_refusals
    assert isinstance(refusal, SnapshotAudienceError)


def test_a_tenant_named_by_configuration_must_match(connect, agent_and_key):
    with pytest.raises(SnapshotAudienceError) as refused:
        connect(agent_and_key[1], tenant="globex").refresh_snapshot()
    assert refused.value.found["tenant"] == "acme"
    assert connect(agent_and_key[1], tenant="acme").refresh_snapshot().body["audience"]["tenant"] == "acme"


# --- planted cache file, pinned keys ------------------------------------------------------------


def test_a_planted_cache_file_with_its_own_key_and_signature_is_refused(connect, agent_and_key):
    airlock = connect(agent_and_key[1])
    genuine = airlock.refresh_snapshot()
    pinned = _trusted(airlock)["public_key_pem"]
    assert pinned == signing.public_key_pem()  # pinned on first use, in the trust file, not in the cache

    attacker = Attacker()
    planted = attacker.resign(genuine.body)
    airlock.cache.path.write_text(
        json.dumps(
            {
                "number": planted["snapshot"]["number"],
                "body": planted["snapshot"],
                "signature": planted["signature"],
                "public_key": attacker.pem,
                "etag": "",
                "fetched_at": 0,
            }
        )
    )  # the old cache format carried its own key

    restarted = connect(agent_and_key[1])
    assert restarted.cache.snapshot is None
    [refusal] = restarted.snapshot_refusals
    assert type(refusal) is SnapshotVerificationError
    assert _trusted(restarted)["public_key_pem"] == pinned
    assert _trusted(restarted)["highest_number"] == genuine.number
    assert "admin.delete_user_permanently" not in json.dumps(restarted.refresh_snapshot().body)


def test_a_planted_cache_file_is_not_trusted_before_any_key_is_pinned(connect, agent_and_key):
    attacker = Attacker()
    planted = attacker.resign({"number": 1, "skills": [], "audience": {}}, number_bump=1000)
    probe = connect(agent_and_key[1])
    probe.cache.path.parent.mkdir(parents=True)
    probe.cache.path.write_text(
        json.dumps(
            {"number": 1001, "body": planted["snapshot"], "signature": planted["signature"], "public_key": attacker.pem}
        )
    )

    fresh = connect(agent_and_key[1])
    assert fresh.cache.snapshot is None  # no pinned key yet: nothing on disk can be verified
    fresh.refresh_snapshot()
    assert _trusted(fresh)["public_key_pem"] == signing.public_key_pem()  # the server's, never the file's


def test_a_key_pinned_on_first_use_is_not_replaced_by_a_later_different_key(connect, agent_and_key, mitm):
    airlock = connect(agent_and_key[1], mitm)
    genuine = airlock.refresh_snapshot()
    pinned = _trusted(airlock)["public_key_pem"]

    attacker = Attacker()
    mitm.answer[PUBLIC_KEY] = lambda: {"algorithm": "Ed25519", "public_key_pem": attacker.pem}
    mitm.answer[SNAPSHOT] = lambda: attacker.resign(genuine.body)
    with pytest.raises(SnapshotKeyChanged) as refused:
        airlock.refresh_snapshot()
    assert refused.value.trust_file == str(airlock.cache.trust.path)
    assert _trusted(airlock)["public_key_pem"] == pinned
    assert airlock.cache.snapshot.signature == genuine.signature

    restarted = connect(agent_and_key[1], mitm)  # a new process still trusts only the first key
    assert restarted.cache.snapshot.signature == genuine.signature
    with pytest.raises(SnapshotKeyChanged):
        restarted.refresh_snapshot()
    assert _trusted(restarted)["public_key_pem"] == pinned


def test_a_key_pinned_by_configuration_is_never_fetched_and_an_impostor_is_refused(
    connect, agent_and_key, mitm, tmp_path, monkeypatch
):
    key_file = tmp_path / "airlock.pub"
    key_file.write_text(signing.public_key_pem())
    monkeypatch.setenv("AIRLOCK_PUBLIC_KEY", str(key_file))
    airlock = connect(agent_and_key[1], mitm)
    genuine = airlock.refresh_snapshot()
    assert PUBLIC_KEY not in mitm.seen
    assert _trusted(airlock)["public_key_pem"] is None  # nothing pinned on first use: configuration rules

    attacker = Attacker()
    mitm.answer[PUBLIC_KEY] = lambda: {"public_key_pem": attacker.pem}
    mitm.answer[SNAPSHOT] = lambda: attacker.resign(genuine.body)
    with pytest.raises(SnapshotKeyChanged, match="by configuration"):
        airlock.refresh_snapshot()
    assert airlock.cache.snapshot.signature == genuine.signature


def test_the_trust_file_is_never_in_the_cache_directory(connect, agent_and_key, tmp_path):
    with pytest.raises(ValueError, match="trust directory"):
        connect(agent_and_key[1], trust_dir=tmp_path / "cache")
    airlock = connect(agent_and_key[1])
    airlock.refresh_snapshot()
    assert airlock.cache.trust.path.parent != airlock.cache.path.parent
    assert "public_key" not in json.loads(airlock.cache.path.read_text())
