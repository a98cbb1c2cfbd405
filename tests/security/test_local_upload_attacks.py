"""Uploads of locally decided calls, attacked (issue 43): impossible times, a flood past the agent's rate limit,
mail sent again for every new run, calls decided while suspended, frozen, under an expired bundle or a role
never opted in, canary versions staged for other tenants, and retention erasing what was flagged."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from airlock_sdk import Airlock, ClientSkillRegistry, Ok
from airlock_sdk.bundles import CachedBundle
from airlock_sdk.local import LocalDecider
from django.core import mail
from django.utils import timezone

from audit.chain import verify_chains
from console.services import freeze_tenant, resume_agent, suspend_agent, unfreeze_tenant
from policies.bundles import bundle_for
from policies.services import set_local_decisions
from registry import rollouts
from registry.snapshots import latest_index, publish_snapshot
from registry.stages import Audience
from retention.services import purge_expired_records
from runs import ratelimit
from runs.models import LocalDecision, LocalFlagEvent, Run, ToolCall
from tests.browser.conftest import asgi_live_server  # noqa: F401 - reused fixture
from tests.retention.factories import close, retention_periods
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import make_skill, published_policy, rule
from tests.runs.test_local_calls import run_id, skills, spooled, upload  # noqa: F401 - reused fixtures
from tests.sdk.test_live import Switchable

pytestmark = pytest.mark.django_db


def at_window_start(clock) -> None:
    """Move Airlock's clock to just after a rate-limit window opens, so a test's calls share one window."""
    clock.advance(ratelimit.WINDOW_S - clock.time() % ratelimit.WINDOW_S + 1)


# 7a: impossible times -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("decided_at", "2026-02-30T00:00:00+00:00"),
        ("decided_at", "2026-01-01T25:00:00+00:00"),
        ("decided_at", "2026-01-01T10:00:00+99:00"),
        ("finished_at", "2026-13-01T10:00:00+00:00"),
    ],
)
def test_an_impossible_time_is_a_400_naming_the_field_and_nothing_of_the_batch_is_recorded(
    agent_client, run_id, field, value
):
    batch = [spooled("good-1"), {**spooled("bad", sequence=2), field: value}, spooled("good-2", sequence=3)]
    response = upload(agent_client, run_id, batch)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["class"] == "validation" and error["code"] == "invalid_time"
    assert error["fields"] == [{"field": f"calls[1].{field}", "message": error["fields"][0]["message"]}]
    assert f"calls[1].{field}" in error["message"]
    assert not ToolCall.objects.filter(run_id=run_id).exists()


# 8: the rate limit and the mail --------------------------------------------------------------------


def test_uploads_count_against_the_agents_rate_limit_and_a_flood_is_refused_whole(
    agent_client, run_id, settings, clock
):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 6
    at_window_start(clock)
    first = upload(agent_client, run_id, [spooled(f"a-{i}", sequence=i) for i in range(6)])
    assert first.status_code == 200 and first.json()["recorded"] == 6
    flood = upload(agent_client, run_id, [spooled(f"b-{i}", sequence=10 + i) for i in range(3)])
    assert flood.status_code == 429, flood.content
    error = flood.json()["error"]
    assert error["code"] == "agent_rate_limited" and 1 <= error["retry_after"] <= ratelimit.WINDOW_S
    assert flood["Retry-After"] == str(error["retry_after"])
    assert not ToolCall.objects.filter(run_id=run_id, call_id__startswith="b-").exists()
    # the gate sees the same minute used up
    gate = post_calls(agent_client, run_id, [call("g-1", "crm.server_side")]).json()["results"][0]
    assert gate["error"]["code"] == "agent_rate_limited"
    clock.advance(error["retry_after"])  # the SDK sends the batch again once the minute is over
    again = upload(agent_client, run_id, [spooled(f"b-{i}", sequence=10 + i) for i in range(3)])
    assert again.status_code == 200 and again.json()["recorded"] == 3


def test_flag_mail_goes_once_per_agent_and_skill_not_again_for_each_new_run(
    agent_client, run_id, tenant_admin, django_capture_on_commit_callbacks
):
    published_policy([rule("no-notes", "deny", 'skill.name == "crm.note_local"', "notes are frozen")])
    runs = [run_id] + [start_run(agent_client)["run_id"] for _ in range(3)]
    for number, run in enumerate(runs):
        with django_capture_on_commit_callbacks(execute=True):
            answer = upload(agent_client, run, [spooled(f"n-{number}", "crm.note_local")])
        assert answer.json()["results"][0]["flagged"] is True
    recipients = sorted(address for message in mail.outbox for address in message.to)
    assert recipients == ["admin@example.com", "support-tools@example.com"]
    assert LocalDecision.objects.filter(flagged=True).count() == 4  # every call is still flagged on record


# 6: canary versions staged for other tenants ------------------------------------------------------


@pytest.fixture
def lookup_v11(skills, owner):
    """crm.lookup_local 1.1.0 published beside 1.0.0; each test stages it."""
    return make_skill("crm.lookup_local", version="1.1.0", adapter="client:crm.lookup_local", publish=False)


def bundle_versions(agent) -> dict[str, dict]:
    return {e["version"]: e for e in bundle_for(agent).body["skills"] if e["name"] == "crm.lookup_local"}


def test_a_bundle_holds_no_canary_staged_for_another_tenant_and_names_no_canary_tenant(
    acme, globex, agent, owner, lookup_v11
):
    rollouts.roll_out_version(version=lookup_v11, user=owner, tenants=["globex"])
    assert set(bundle_versions(agent)) == {"1.0.0"}
    assert "globex" not in json.dumps(bundle_for(agent).body)
    rollouts.roll_out_version(version=lookup_v11, user=owner, tenants=["acme"])
    versions = bundle_versions(agent)
    assert set(versions) == {"1.0.0", "1.1.0"} and "share_of_runs" not in versions["1.1.0"]


def test_a_share_of_runs_is_marked_and_the_sdk_picks_the_servers_version_for_each_run(
    acme, globex, agent, owner, lookup_v11
):
    rollouts.roll_out_version(version=lookup_v11, user=owner, percent=40)
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="t")
    assert bundle_versions(agent)["1.1.0"]["share_of_runs"] == 40
    signed = bundle_for(agent)
    bundle = CachedBundle(number=signed.body["number"], body=signed.body, signature=signed.signature)
    decider, index, chosen = LocalDecider(), latest_index(), set()
    for number in range(200):
        run_key = str(uuid.UUID(int=number * 7919 + 13))
        server = index.resolve("crm.lookup_local", audience=Audience(tenant_id=acme.pk, run_key=run_key))
        local = decider.decide(
            bundle,
            name="crm.lookup_local",
            version=None,
            arguments={"customer": "c-1"},
            run_tainted=False,
            taint_source="",
            end_user="u-1",
            end_user_roles=[],
            run_id=run_key,
        )
        assert local.verdict == "allow" and local.skill["version"] == server.version, run_key
        pinned = decider.decide(
            bundle,
            name="crm.lookup_local",
            version="1.1.0",
            arguments={"customer": "c-1"},
            run_tainted=False,
            taint_source="",
            end_user="u-1",
            end_user_roles=[],
            run_id=run_key,
        )
        assert (pinned.verdict == "allow") == (server.version == "1.1.0"), run_key  # outside: not in the bundle
        chosen.add(server.version)
    assert chosen == {"1.0.0", "1.1.0"}


def test_an_upload_of_the_tenants_own_canary_is_recorded_unflagged(acme, owner, lookup_v11, agent_client, run_id):
    rollouts.roll_out_version(version=lookup_v11, user=owner, tenants=["acme"])
    run_id = start_run(agent_client)["run_id"]  # a run on the snapshot with the stage
    answer = upload(agent_client, run_id, [spooled("c-1", version="1.1.0")]).json()["results"][0]
    assert answer["status"] == "recorded" and answer["flagged"] is False, answer
    assert ToolCall.objects.get(run_id=run_id, call_id="c-1").requested_version == "1.1.0"


def test_a_call_decided_with_another_tenants_canary_is_recorded_flagged_never_dropped(
    acme, globex, owner, lookup_v11, agent_client, run_id
):
    rollouts.roll_out_version(version=lookup_v11, user=owner, tenants=["globex"])
    run_id = start_run(agent_client)["run_id"]
    answer = upload(agent_client, run_id, [spooled("c-1", version="1.1.0")]).json()["results"][0]
    assert answer["status"] == "recorded" and answer["flagged"] is True, answer
    local = LocalDecision.objects.get(call__call_id="c-1")
    assert "no longer resolves" in local.flag_reason and local.flag_verdict == "deny"


@pytest.fixture
def sdk_outage(asgi_live_server, agent_and_key, tmp_path, monkeypatch):
    """acme's agent as a real SDK (bundle cache, spool and uploader) against a live Airlock it can lose."""
    monkeypatch.setenv("AIRLOCK_TRUST_DIR", str(tmp_path / "trust"))
    monkeypatch.delenv("AIRLOCK_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("AIRLOCK_TENANT", raising=False)
    switch, ran = Switchable(), []
    client_skills = ClientSkillRegistry()
    client_skills.register("crm.lookup_local", lambda customer: ran.append(customer) or {"name": "Ada"})
    client = Airlock(
        asgi_live_server.url,
        agent_and_key[1],
        cache_dir=tmp_path / "cache",
        retries=1,
        client_skills=client_skills,
        http_client=httpx.Client(transport=switch, timeout=40),
        spool_path=tmp_path / "spool.sqlite3",
    )
    yield client, switch, ran
    client.close()


@pytest.mark.django_db(transaction=True)
def test_the_sdk_never_decides_with_another_tenants_canary_and_what_it_ran_is_recorded(
    acme, globex, owner, lookup_v11, sdk_outage
):
    airlock, switch, ran = sdk_outage
    rollouts.roll_out_version(version=lookup_v11, user=owner, tenants=["globex"])
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="t")
    run = airlock.start_run(end_user="u-1", task="outage")
    airlock.refresh_bundle()
    switch.down = True
    (result,) = run.call([{"name": "crm.lookup_local", "arguments": {"customer": "c-1"}}])
    assert isinstance(result, Ok) and result.decided_locally and ran == ["c-1"]
    assert result.skill["version"] == "1.0.0"  # the version the gate gives acme's runs, not globex's canary
    switch.down = False
    report = airlock.flush_spool()
    assert report.recorded == [result.call_id] and report.refused == [] and report.flagged == []
    assert ToolCall.objects.get(run_id=run.run_id).requested_version == "1.0.0"


# 4: what held when the call was decided -------------------------------------------------------------


def flag_of(agent_client, run_id: str, call: dict) -> LocalDecision:
    answer = upload(agent_client, run_id, [call]).json()["results"][0]
    assert answer["status"] == "recorded", answer
    return LocalDecision.objects.get(call__run_id=run_id, call__call_id=call["call_id"])


def test_a_call_decided_while_the_agent_was_suspended_is_flagged_though_it_was_resumed_since(
    agent, tenant_admin, agent_client, run_id
):
    suspend_agent(agent=agent, by=tenant_admin, reason="leaking customer data")
    during = datetime.now(UTC)
    resume_agent(agent=agent, by=tenant_admin)
    local = flag_of(agent_client, run_id, spooled("s-1", at=during))
    assert local.flagged and "suspended agent support-bot" in local.flag_reason
    assert "leaking customer data" in local.flag_reason


def test_a_call_decided_before_a_suspension_is_not_flagged_by_it(agent, tenant_admin, agent_client, run_id):
    before = datetime.now(UTC) - timedelta(seconds=5)
    suspend_agent(agent=agent, by=tenant_admin, reason="incident")
    assert flag_of(agent_client, run_id, spooled("s-1", at=before)).flagged is False


def test_a_write_decided_while_the_tenant_was_frozen_is_flagged_though_it_was_unfrozen_since(
    acme, tenant_admin, agent_client, run_id
):
    freeze_tenant(tenant=acme, by=tenant_admin, reason="breach under investigation")
    during = datetime.now(UTC)
    unfreeze_tenant(tenant=acme, by=tenant_admin)
    write = flag_of(agent_client, run_id, spooled("w-1", "crm.note_local", at=during))
    assert write.flagged and "froze tenant acme: breach under investigation" in write.flag_reason
    assert flag_of(agent_client, run_id, spooled("r-1", at=during, sequence=2)).flagged is False  # reads ran


def test_a_call_decided_after_its_bundle_expired_is_flagged(acme, agent, agent_client, run_id):
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(seconds=30), by_label="a")
    short = bundle_for(agent).body
    valid_until = datetime.fromisoformat(short["valid_until"])
    inside = flag_of(
        agent_client, run_id, spooled("in", bundle_number=short["number"], at=valid_until - timedelta(seconds=1))
    )
    assert inside.flagged is False
    late = flag_of(
        agent_client, run_id, spooled("late", bundle_number=short["number"], at=valid_until + timedelta(seconds=1))
    )
    assert late.flagged and f"decision bundle {short['number']} expired" in late.flag_reason


def test_a_call_decided_under_a_bundle_that_did_not_opt_the_role_in_is_flagged(acme, agent, agent_client, run_id):
    set_local_decisions(tenant=acme, agent_roles=["billing"], bundle_validity=timedelta(minutes=10), by_label="a")
    refused = bundle_for(agent).body
    assert refused["local_decisions"] is False
    local = flag_of(agent_client, run_id, spooled("f-1", bundle_number=refused["number"]))
    assert local.flagged and "may not decide locally" in local.flag_reason


def test_a_version_published_after_the_run_started_is_recorded_flagged_from_the_bundles_snapshot(
    agent, agent_client, run_id, lookup_v11
):
    publish_snapshot(reason="1.1.0 for everyone, after the run started")
    newer = bundle_for(agent).body
    assert "1.1.0" in bundle_versions(agent)
    local = flag_of(agent_client, run_id, spooled("v-1", version="1.1.0", bundle_number=newer["number"]))
    assert local.flagged and "no longer resolves" in local.flag_reason


# 10: retention keeps what was flagged --------------------------------------------------------------

DISPUTE = "customer c-secret-77 disputes the refund"


def test_retention_keeps_a_flagged_local_call_as_a_detached_redacted_audit_row_for_the_audit_period(
    settings, agent_client, run_id
):
    retention_periods(settings)
    published_policy([rule("no-notes", "deny", 'skill.name == "crm.note_local"', f"notes are frozen: {DISPUTE}")])
    secret = {"customer": "c-secret-77", "note": "refund promised"}
    upload(agent_client, run_id, [spooled("n-1", "crm.note_local", arguments=secret), spooled("r-1", sequence=2)])
    call = ToolCall.objects.get(run_id=run_id, call_id="n-1")
    close(Run.objects.get(pk=run_id), days_ago=200)

    report = purge_expired_records()

    assert report.runs == 1 and not Run.objects.filter(pk=run_id).exists()
    assert not LocalDecision.objects.exists()  # the record of the run went with it
    (row,) = LocalFlagEvent.objects.all()  # only the flagged call is kept, as its audit row
    assert (str(row.run_ref), row.call_ref, row.skill_name, row.skill_version) == (
        run_id,
        "n-1",
        "crm.note_local",
        "1.0.0",
    )
    assert row.call_id is None and row.tenant.slug == "acme" and row.agent_label == "support-bot"
    assert (row.flag_verdict, row.bundle_number, row.decided_at) == ("deny", 1, call.created_at)
    assert row.redacted_at is not None and row.detached_at is not None
    assert row.detail["code"] == "denied_by_policy" and row.detail["rule_id"].endswith("no-notes")
    assert row.detail["arguments_sha256"] == call.arguments_sha256
    assert row.detail["flag_reason"]["redacted"] is True
    kept = str([getattr(row, f.attname) for f in row._meta.concrete_fields])
    assert "c-secret-77" not in kept and "refund promised" not in kept and "disputes" not in kept
    reports, unlinked = verify_chains()  # written into the tenant's audit chain, which still checks
    assert unlinked == [] and [r.problems for r in reports] == [[] for _ in reports]
    assert sum(r.redacted for r in reports) >= 1

    assert purge_expired_records(now=timezone.now() + timedelta(days=364)).audit_deleted == 0
    assert purge_expired_records(now=timezone.now() + timedelta(days=366)).audit_deleted >= 1
    assert not LocalFlagEvent.objects.exists()
