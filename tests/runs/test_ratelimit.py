"""Rate limits as an abuser meets them: per agent over every skill and run, per tenant and skill (one tenant
cannot use up another's), the operator's AIRLOCK_RATE_LIMITS over the manifest, retry_after at a window's
edge. They run on the embedded cache and, with REDIS_URL set, on Redis."""

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from redis.connection import AbstractConnection

from console.env import rate_limit_list
from runs import ratelimit
from runs.errors import RateLimited
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db


def outcomes(client, calls: list[dict]) -> list[str]:
    """ "ok" or the error code of each call, in one batch of a new run."""
    run = start_run(client)
    results = post_calls(client, run["run_id"], calls).json()["results"]
    return [r["status"] if r["status"] == "ok" else r["error"]["code"] for r in results]


def lookups(count: int, name: str = "orders.lookup") -> list[dict]:
    return [call(f"c{i}", name, {"i": i}) for i in range(count)]


def overrides(*entries: str) -> list[tuple[str, str, int]]:
    return rate_limit_list("AIRLOCK_RATE_LIMITS", list(entries))


@pytest.fixture
def lookup_for_both_tenants(acme, globex):
    """orders.lookup, whose owner allows 2 calls a minute, granted to both tenants' support agents."""
    grant(acme, "orders.*")
    grant(globex, "orders.*")
    make_skill("orders.lookup", adapter="python:test.echo", rate_limit_per_minute=2)


def test_a_tenant_that_exhausts_a_skill_leaves_other_tenants_their_own_limit(
    agent_client, outsider_agent_client, lookup_for_both_tenants
):
    run = start_run(agent_client)
    results = post_calls(agent_client, run["run_id"], lookups(3)).json()["results"]
    assert [r["status"] for r in results] == ["ok", "ok", "error"]
    refused = results[2]["error"]
    assert refused["code"] == "skill_rate_limited" and refused["message"].endswith("a minute for this tenant.")
    assert outcomes(outsider_agent_client, lookups(2)) == ["ok", "ok"]
    assert outcomes(agent_client, lookups(1)) == ["skill_rate_limited"]


def test_an_agent_cannot_dodge_its_limit_by_spreading_calls_over_skills_runs_and_unknown_names(
    agent_client, acme, settings
):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 4
    grant(acme, "orders.*")
    for name in ("orders.first", "orders.second", "orders.third"):
        make_skill(name, adapter="python:test.echo")
    spread = [call("a", "orders.first"), call("b", "orders.second"), call("c", "orders.nonexistent")]
    assert outcomes(agent_client, spread) == ["ok", "ok", "unknown_skill"]
    assert outcomes(agent_client, [call("d", "orders.third"), call("e", "orders.first")]) == [
        "ok",
        "agent_rate_limited",
    ]


def test_the_operators_entry_for_a_tenant_wins_over_the_manifest_in_both_directions(
    agent_client, outsider_agent_client, lookup_for_both_tenants, settings
):
    settings.AIRLOCK_RATE_LIMITS = overrides("acme:orders.lookup=4", "globex:orders.*=1")
    assert outcomes(agent_client, lookups(5)) == ["ok"] * 4 + ["skill_rate_limited"]
    assert outcomes(outsider_agent_client, lookups(2)) == ["ok", "skill_rate_limited"]


ENTRIES = ("acme:orders.lookup=10", "acme:orders.*=20", "acme:orders.refunds.*=25", "*:orders.cancel=30", "*:*=40")


@pytest.mark.parametrize(
    ("entries", "tenant", "skill", "manifest_limit", "expected"),
    [
        (ENTRIES, "acme", "orders.lookup", 5, 10),  # the tenant's entry for the skill's own name
        (ENTRIES, "acme", "orders.refunds.create", 5, 25),  # then its longest namespace
        (ENTRIES, "acme", "orders.ship", 5, 20),
        (ENTRIES, "acme", "orders.cancel", 5, 30),  # a name for every tenant beats a tenant's namespace
        (ENTRIES + ("acme:orders.cancel=35",), "acme", "orders.cancel", 5, 35),  # as specific: the tenant's
        (ENTRIES, "globex", "orders.lookup", 5, 40),  # any entry beats the manifest
        (ENTRIES[:4], "globex", "billing.refund", 5, 5),  # no entry: the skill owner's manifest
        (ENTRIES[:4], "globex", "billing.refund", None, 30000),  # nor a manifest: the deployment default
        (("acme:orders.*=20",), "acme", "ordersx.lookup", None, 30000),  # a namespace as grants match it
        (("acme:orders.*=20",), "acme", "orders.refunds.create", None, 20),
        (("acme:orders.*=20",), "acme-eu", "orders.lookup", None, 30000),  # a tenant is named exactly
    ],
)
def test_which_limit_applies(entries, tenant, skill, manifest_limit, expected, settings):
    settings.AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE = 30000
    settings.AIRLOCK_RATE_LIMITS = overrides(*entries)
    manifest = {"execution": {"rate_limit_per_minute": manifest_limit}} if manifest_limit else {}
    assert ratelimit.skill_limit(skill, manifest, tenant_slug=tenant) == expected


def test_the_variable_reads_tenant_skill_and_calls_per_minute():
    assert overrides("acme:support.*=3000", " *:payments.refund = 60", "acme:*=900") == [
        ("acme", "support.*", 3000),
        ("*", "payments.refund", 60),
        ("acme", "*", 900),
    ]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("acme=3000", "use tenant:skill=calls_per_minute"),
        ("acme:support.*", "use tenant:skill=calls_per_minute"),
        ("Acme:support.*=10", "'Acme' is not a tenant slug"),
        ("acme:support*=10", "'support*' is not a skill name"),
        ("acme:agent=900", "'agent' is not a skill name"),
        ("acme:support.*=lots", "'lots' is not a whole number"),
        ("acme:support.*=0", "'0' is not a whole number of calls a minute, at least 1"),
        ("acme:support.*=-5", "'-5' is not a whole number"),
    ],
)
def test_a_malformed_entry_is_refused_naming_it(entry, problem):
    with pytest.raises(ImproperlyConfigured) as refused:
        overrides("acme:billing.*=60", entry)
    assert str(refused.value).startswith(f"AIRLOCK_RATE_LIMITS entry {entry!r}: ")
    assert problem in str(refused.value)


def test_two_entries_for_the_same_tenant_and_skill_are_refused():
    with pytest.raises(ImproperlyConfigured, match=r"entry 'acme:billing.\*=10': acme:billing.\* is already limited"):
        overrides("acme:billing.*=60", "acme:billing.*=10")


def test_retry_after_counts_down_to_the_window_edge_and_the_next_window_starts_afresh(clock, settings):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 1
    clock.advance(ratelimit.WINDOW_S - clock.time() % ratelimit.WINDOW_S + 50)  # 10 s before an edge
    ratelimit.check_agent(7)
    with pytest.raises(RateLimited) as refused:
        ratelimit.check_agent(7)
    assert refused.value.code == "agent_rate_limited" and refused.value.extra["retry_after"] == 10
    clock.advance(9)
    with pytest.raises(RateLimited) as refused:
        ratelimit.check_agent(7)
    assert refused.value.extra["retry_after"] == 1
    clock.advance(1)
    ratelimit.check_agent(7)  # a new window
    with pytest.raises(RateLimited) as refused:
        ratelimit.check_agent(7)
    assert refused.value.extra["retry_after"] == 60


@pytest.mark.redis
def test_each_check_is_one_round_trip_to_redis_and_every_process_sees_the_count(clock, settings, monkeypatch):
    clock.advance(ratelimit.WINDOW_S - clock.time() % ratelimit.WINDOW_S + 10)  # not near an edge
    check = {"tenant_id": 3, "tenant_slug": "acme"}
    ratelimit.check_skill("orders.lookup", {}, **check)  # connects (its handshake is not a check)
    sent = []
    original = AbstractConnection.send_packed_command
    monkeypatch.setattr(
        AbstractConnection, "send_packed_command", lambda self, *a, **kw: sent.append(1) or original(self, *a, **kw)
    )
    ratelimit.check_skill("orders.lookup", {}, **check)
    ratelimit.check_agent(7)
    assert len(sent) == 2
    window = int(clock.time() // ratelimit.WINDOW_S)
    elsewhere = redis.Redis.from_url(settings.REDIS_URL)  # as another web or worker process would
    assert int(elsewhere.get(f"airlock:rl:skill:3:orders.lookup:{window}")) == 2
    assert 0 < elsewhere.ttl(f"airlock:rl:agent:7:{window}") <= ratelimit.KEY_TTL_S


@pytest.mark.redis
def test_a_call_checks_both_limits_in_one_round_trip_and_an_agent_over_its_limit_spends_no_skill_budget(
    clock, settings, monkeypatch
):
    clock.advance(ratelimit.WINDOW_S - clock.time() % ratelimit.WINDOW_S + 10)
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 2
    check = {"tenant_id": 5, "tenant_slug": "acme"}
    ratelimit.check_call(8, "orders.lookup", {}, **check)  # connects and loads the script
    sent = []
    original = AbstractConnection.send_packed_command
    monkeypatch.setattr(
        AbstractConnection, "send_packed_command", lambda self, *a, **kw: sent.append(1) or original(self, *a, **kw)
    )
    ratelimit.check_call(8, "orders.lookup", {}, **check)
    assert len(sent) == 1
    with pytest.raises(RateLimited) as refused:  # the looping agent's third call
        ratelimit.check_call(8, "orders.lookup", {}, **check)
    assert refused.value.code == "agent_rate_limited"
    window = int(clock.time() // ratelimit.WINDOW_S)
    elsewhere = redis.Redis.from_url(settings.REDIS_URL)
    assert int(elsewhere.get(f"airlock:rl:skill:5:orders.lookup:{window}")) == 2  # not 3: the tenant keeps it
    assert 0 < elsewhere.ttl(f"airlock:rl:skill:5:orders.lookup:{window}") <= ratelimit.KEY_TTL_S


def test_refused_calls_still_count_against_the_agent_and_the_limit_answers_first_once_over_it(
    agent_client, acme, settings
):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 3
    grant(acme, "orders.*")
    make_skill("orders.lookup", adapter="python:test.echo")
    calls = [call("a", "orders.nope", {}), call("b", "orders.lookup", {"i": 1}), call("c", "orders.lookup", "bad")]
    calls += [call("d", "orders.nope", {}), call("e", "orders.lookup", {"i": 2})]
    codes = outcomes(agent_client, calls)
    assert codes[:2] == ["unknown_skill", "ok"] and codes[2] != "ok"
    assert codes[3:] == ["agent_rate_limited", "agent_rate_limited"]
