"""Local decisions from the signed bundle, against a live Airlock that goes away, as an attacker tests them."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta

import httpx
import pytest
from airlock_sdk import Airlock, ClientSkillRegistry, ControlPlaneUnavailable, Error, Ok, SnapshotVerificationError
from airlock_sdk.canonical import canonical_json
from airlock_sdk.errors import OutcomeUnknown, PermissionDenied, SnapshotAudienceError, SnapshotRollbackError
from airlock_sdk.spool import Spool
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent, revoke_agent, suspend_agent
from policies import bundles
from policies.services import set_local_decisions
from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, make_skill, published_policy, rule

BUNDLE = "/api/v1/decision-bundle"


class Outage(httpx.BaseTransport):
    """The real transport, with a switch that makes Airlock unreachable and a hook that forges the bundle."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.down = False
        self.forge = None  # f(json) -> json for the bundle's answer
        self.lose_answers = False  # the gate handles each POST, then its answer is lost

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused (Airlock down)", request=request)
        forging = self.forge is not None and request.url.path == BUNDLE
        if forging:
            del request.headers["If-None-Match"]
        response = self.inner.handle_request(request)
        if self.lose_answers and request.method == "POST":
            response.read()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        if forging:
            response.read()
            return httpx.Response(200, json=self.forge(response.json()), headers={"ETag": '"forged"'})
        return response


@pytest.fixture
def outage() -> Outage:
    return Outage()


@pytest.fixture
def notes():
    calls: list[dict] = []
    return calls


@pytest.fixture
def local_catalog(catalog, acme):
    make_skill(
        "workspace.write_note",
        effect="write",
        adapter="client:workspace.write_note",
        schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        publish=False,
    )
    make_skill("workspace.shred_notes", effect="destructive", adapter="client:workspace.shred_notes", publish=False)
    published_policy(
        [
            rule(
                "no-vip",
                "deny",
                'has(args.customer_id) && args.customer_id == "vip-1"',
                "VIP customers' notes are read by their manager only",
            )
        ],
        scope="tenant",
        tenant=acme,
        name="vip notes",
    )
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="admin")
    return publish_snapshot(reason="local decisions catalog")


@pytest.fixture
def airlock(asgi_live_server, local_catalog, agent_and_key, outage, tmp_path, notes) -> Airlock:
    skills = ClientSkillRegistry()
    skills.register("workspace.read_local_notes", lambda customer_id: notes.append(customer_id) or ["note"])
    skills.register("workspace.write_note", lambda text: notes.append(text) or {"saved": True})
    skills.register("workspace.shred_notes", lambda: notes.append("SHREDDED"))
    client = Airlock(
        asgi_live_server.url,
        agent_and_key[1],
        cache_dir=tmp_path / "cache",
        retries=1,
        client_skills=skills,
        http_client=httpx.Client(transport=outage, timeout=40),
    )
    yield client
    client.close()


def read(customer_id: str = "c-1") -> dict:
    return {"name": "workspace.read_local_notes", "arguments": {"customer_id": customer_id}}


def test_an_allowed_client_read_runs_locally_while_airlock_is_down_and_is_spooled_first(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    assert airlock.bundles.bundle is not None and airlock.bundles.bundle.body["local_decisions"] is True
    outage.down = True

    (result,) = run.call([read()])

    assert isinstance(result, Ok) and result.decided_locally and result.executed_locally
    assert result.content == ["note"] and notes == ["c-1"]
    (spooled,) = airlock.spool.pending()
    assert (spooled.call_id, spooled.run_id, spooled.skill) == (
        result.call_id,
        run.run_id,
        "workspace.read_local_notes",
    )
    assert spooled.verdict == "allow" and spooled.reason == "reads are allowed by default"
    assert spooled.status == "succeeded" and spooled.result == ["note"]
    assert spooled.bundle_number == airlock.bundles.bundle.number


def test_the_decision_is_on_disk_before_the_function_runs(airlock, outage):
    """Read through a second connection while the tool runs: the decision is already committed."""
    seen = []

    def read_notes(customer_id: str) -> list:
        seen.extend((c.call_id, c.status) for c in Spool(airlock.spool.path).pending())
        return []

    airlock.client_skills.register("workspace.read_local_notes", read_notes)
    run = airlock.start_run(end_user="u-1", task="notes")
    outage.down = True
    (result,) = run.call([read()])
    assert seen == [(result.call_id, "decided")]
    assert [c.status for c in airlock.spool.pending()] == ["succeeded"]


def test_a_deny_rule_gives_the_servers_exact_error_locally(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    (online,) = run.call([read("vip-1")])
    outage.down = True
    (offline,) = run.call([read("vip-1")])

    assert isinstance(online, Error) and isinstance(offline, Error)
    assert (offline.error_class, offline.code, offline.message) == (online.error_class, online.code, online.message)
    assert offline.details["rule_id"] == online.details["rule_id"]
    assert offline.details["policy_version"] == online.details["policy_version"]
    assert online.code == "denied_by_policy" and notes == [] and airlock.spool.pending() == []


def test_confirm_server_side_skills_and_unknown_skills_fail_closed_as_unavailable(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    outage.down = True
    results = run.call(
        [
            {"name": "workspace.shred_notes", "arguments": {}},  # destructive: a person must confirm
            {"name": "customer.list_orders", "arguments": {"customer_id": "c-1"}},  # runs on Airlock's side
            {"name": "workspace.not_published", "arguments": {}},
        ]
    )
    assert [(r.error_class, r.code) for r in results] == [("unavailable", "airlock_unreachable")] * 3
    assert all(r.retryable and r.retry_after and "Airlock is unreachable" in r.message for r in results)
    assert "confirm" in results[0].message and "not in decision bundle" in results[1].message
    assert notes == [] and airlock.spool.pending() == []


def test_a_lost_answer_never_claims_a_server_side_call_did_not_run(airlock, outage, notes):
    """The gate may have executed a server-side call whose answer was lost: the SDK raises OutcomeUnknown
    instead of an `unavailable` that says nothing ran. A batch of client calls only is decided here (the
    gate never runs those itself)."""
    run = airlock.start_run(end_user="u-1", task="notes")
    outage.lose_answers = True
    with pytest.raises(OutcomeUnknown):
        run.call([read(), {"name": "customer.list_orders", "arguments": {"customer_id": "c-1"}}])
    assert notes == []
    (result,) = run.call([read("c-2")])
    assert isinstance(result, Ok) and result.decided_locally and notes == ["c-2"]


def test_a_role_not_opted_in_never_decides_locally(airlock, outage, acme, notes):
    set_local_decisions(tenant=acme, agent_roles=["billing"], bundle_validity=timedelta(minutes=10), by_label="a")
    run = airlock.start_run(end_user="u-1", task="notes")
    airlock.refresh_bundle()
    assert airlock.bundles.bundle.body["local_decisions"] is False
    outage.down = True
    with pytest.raises(ControlPlaneUnavailable):  # as without local decisions: nothing is decided here
        run.call([read()])
    airlock.local_first = True
    with pytest.raises(ControlPlaneUnavailable):
        run.call([read()])
    assert notes == [] and airlock.spool.pending() == []


def test_local_first_decides_without_the_network_and_sends_the_rest(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    airlock.local_first = True
    calls = []
    original = airlock.transport.request
    airlock.transport.request = lambda method, path, **kw: calls.append(path) or original(method, path, **kw)
    first, second = run.call([read(), {"name": "customer.list_orders", "arguments": {"customer_id": "c-1"}}])
    assert isinstance(first, Ok) and first.decided_locally and notes == ["c-1"]
    assert isinstance(second, Ok) and not second.decided_locally
    # one batch, holding only the server-side call (the spool's upload rides on its answer: airlock_sdk.uploader)
    assert [path for path in calls if not path.endswith("/local-calls")] == [f"/api/v1/runs/{run.run_id}/calls"]


def test_the_agents_rate_limit_holds_locally(airlock, outage, settings, notes):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 3
    airlock.refresh_bundle()
    run = airlock.start_run(end_user="u-1", task="notes")
    outage.down = True
    results = run.call([read(f"c-{n}") for n in range(5)])
    assert [r.ok for r in results] == [True, True, True, False, False]
    assert {(r.error_class, r.code) for r in results[3:]} == {("rate_limited", "agent_rate_limited")}
    assert results[3].message == "This agent made more than 3 calls this minute." and len(notes) == 3


def test_an_expired_bundle_decides_nothing(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    bundle = airlock.bundles.bundle
    verdict = airlock.decider.decide(
        bundle,
        name="workspace.read_local_notes",
        version=None,
        arguments={"customer_id": "c-1"},
        run_tainted=False,
        taint_source="",
        end_user="u-1",
        end_user_roles=[],
        now=bundle.valid_until,
    )
    assert verdict.verdict == "unavailable" and "expired" in verdict.error["message"]
    assert run is not None and notes == []


def test_the_taint_floor_holds_locally(airlock, outage, notes):
    run = airlock.start_run(end_user="u-1", task="notes")
    outage.down = True
    untainted, tainted = run.call(
        [
            {"name": "workspace.write_note", "arguments": {"text": "a"}},
            {"name": "workspace.write_note", "arguments": {"text": "b"}, "taint": "read a stranger's e-mail"},
        ]
    )
    assert isinstance(untainted, Ok) and notes == ["a"]
    assert (tainted.error_class, tainted.code) == ("unavailable", "airlock_unreachable")
    assert "untrusted content" in tainted.message


# The bundle as an attacker would serve it ----------------------------------------------------------------


def resign(data: dict, key: Ed25519PrivateKey) -> dict:
    data["signature"] = base64.b64encode(key.sign(canonical_json(data["bundle"]))).decode()
    return data


def test_a_bundle_signed_by_another_key_is_refused_and_the_last_good_one_kept(airlock, outage):
    good = airlock.refresh_bundle()
    outage.forge = lambda data: resign(
        {**data, "bundle": {**data["bundle"], "number": 999}}, Ed25519PrivateKey.generate()
    )
    with pytest.raises(SnapshotVerificationError):
        airlock.refresh_bundle()
    assert airlock.bundles.bundle is good and airlock.bundles.trust.state.highest_number == good.number


def test_a_tampered_bundle_with_its_deny_policy_removed_is_refused(airlock, outage):
    good = airlock.refresh_bundle()
    outage.forge = lambda data: {**data, "bundle": {**data["bundle"], "policies": []}}
    with pytest.raises(SnapshotVerificationError, match="does not verify"):
        airlock.refresh_bundle()
    assert airlock.bundles.bundle is good and good.body["policies"]


def test_a_bundle_signed_for_another_agent_is_refused(airlock, outage, acme):
    good = airlock.refresh_bundle()
    other, _ = create_agent(tenant=acme, name="other-bot", role="support")
    theirs = bundles.bundle_for(other)
    outage.forge = lambda data: {**data, "bundle": theirs.body, "signature": theirs.signature}
    with pytest.raises(SnapshotAudienceError):
        airlock.refresh_bundle()
    assert airlock.bundles.bundle is good


def test_an_older_bundle_is_refused_as_a_rollback(airlock, outage, acme):
    old = airlock.refresh_bundle()
    grant(acme, "extra.*")  # the content changes: the next bundle has a higher number
    new = airlock.refresh_bundle()
    assert new.number == old.number + 1
    outage.forge = lambda data: {**data, "bundle": old.body, "signature": old.signature}
    with pytest.raises(SnapshotRollbackError):
        airlock.refresh_bundle()
    assert airlock.bundles.bundle is new


def test_a_bundle_planted_in_the_cache_directory_is_not_trusted(airlock, agent_and_key, asgi_live_server, tmp_path):
    good = airlock.refresh_bundle()
    planted = json.loads(airlock.bundles.path.read_text())
    planted["body"]["policies"] = []
    airlock.bundles.path.write_text(json.dumps(planted))
    again = Airlock(asgi_live_server.url, agent_and_key[1], cache_dir=tmp_path / "cache", use_cache=True)
    try:
        assert again.bundles.bundle is None and again.bundles.refusals
    finally:
        again.close()
    assert good.body["policies"]


def test_a_suspended_or_revoked_agent_gets_no_bundle_and_its_last_one_expires(airlock, agent_and_key, tenant_admin):
    good = airlock.refresh_bundle()
    agent = agent_and_key[0]
    suspend_agent(agent=agent, by=tenant_admin, reason="incident 7")
    with pytest.raises(PermissionDenied) as refused:
        airlock.refresh_bundle()
    assert refused.value.code == "agent_suspended" and airlock.bundles.bundle is good
    revoke_agent(agent=agent)
    with pytest.raises(Exception) as revoked:
        airlock.refresh_bundle()
    assert getattr(revoked.value, "status_code", None) == 401
    verdict = airlock.decider.decide(
        good,
        name="workspace.read_local_notes",
        version=None,
        arguments={"customer_id": "c-1"},
        run_tainted=False,
        taint_source="",
        end_user="u-1",
        end_user_roles=[],
        now=good.valid_until,
    )
    assert verdict.verdict == "unavailable"


def test_the_bundle_answers_304_while_unchanged_and_lasts_at_most_the_ceiling(agent_client, local_catalog, settings):
    first = agent_client.get(reverse("policies_api:decision_bundle"))
    assert first.status_code == 200
    again = agent_client.get(reverse("policies_api:decision_bundle"), HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS = 60
    body = agent_client.get(reverse("policies_api:decision_bundle")).json()["bundle"]
    span = datetime.fromisoformat(body["valid_until"]) - datetime.fromisoformat(body["issued_at"])
    assert span == timedelta(seconds=60) and body["number"] > first.json()["bundle"]["number"]
    assert [s["name"] for s in body["skills"]] == [
        "workspace.read_local_notes",
        "workspace.shred_notes",
        "workspace.write_note",
    ]  # client-executed skills only


def test_the_bundle_needs_an_agent_key(client, local_catalog, tenant_admin):
    client.force_login(tenant_admin)
    assert client.get(reverse("policies_api:decision_bundle")).status_code in (401, 403)


# The tenant admin's opt-in ------------------------------------------------------------------------------


def api_client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_tenant_admin_opts_a_role_in_over_the_api(tenant_admin, acme, settings):
    admin_api_client = api_client_for(tenant_admin)
    url = reverse("policies_api:tenant_local_decisions", args=[acme.slug])
    assert admin_api_client.get(url).json()["agent_roles"] == []
    answer = admin_api_client.put(url, {"agent_roles": ["support"], "bundle_validity_seconds": 300}, format="json")
    assert answer.status_code == 200 and answer.json()["agent_roles"] == ["support"]
    assert bundles.settings_of(acme).bundle_validity == timedelta(seconds=300)
    too_long = {"agent_roles": ["support"], "bundle_validity_seconds": settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS + 1}
    refused = admin_api_client.put(url, too_long, format="json")
    assert refused.status_code == 400 and bundles.settings_of(acme).bundle_validity == timedelta(seconds=300)


def test_another_tenants_admin_and_a_viewer_cannot_opt_in(acme, outsider, viewer):
    url = reverse("policies_api:tenant_local_decisions", args=[acme.slug])
    body = {"agent_roles": ["support"], "bundle_validity_seconds": 300}
    assert api_client_for(outsider).put(url, body, format="json").status_code == 404
    assert api_client_for(viewer).put(url, body, format="json").status_code in (403, 404)
    assert bundles.settings_of(acme).agent_roles == []
