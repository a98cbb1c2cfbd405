"""Grants and policy lifecycle: snapshots, publish gating by tests, rollback, shadow verdicts, simulation."""

import pytest

from policies import services
from policies.models import Scope, VersionStatus
from registry.models import Snapshot
from registry.snapshots import latest_snapshot
from runs.models import ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, rule

pytestmark = pytest.mark.django_db


def test_grant_and_revoke_publish_snapshots_with_grants_section(acme, tenant_admin):
    before = Snapshot.objects.count()
    created = services.create_grant(
        tenant=acme,
        skill_pattern="billing.*",
        agent_role="support",
        granted_by=tenant_admin,
        oauth_scopes=["refunds.write", "refunds.write"],
    )
    snapshot = latest_snapshot()
    assert Snapshot.objects.count() == before + 1
    assert snapshot.body["grants"] == [
        {
            "tenant": "acme",
            "skill": "billing.*",
            "agent_role": "support",
            "oauth_scopes": ["refunds.write"],
            "expires_at": None,
        }
    ]
    services.revoke_grant(grant=created, revoked_by=tenant_admin)
    assert latest_snapshot().body["grants"] == []
    created.refresh_from_db()
    assert created.revoked_by == tenant_admin and not created.is_active
    count = Snapshot.objects.count()
    services.revoke_grant(grant=created, revoked_by=tenant_admin)  # revoking twice publishes nothing new
    assert Snapshot.objects.count() == count


def test_a_grant_reaching_its_expiry_publishes_one_snapshot_without_it(acme, tenant_admin):
    from datetime import timedelta

    from django.utils import timezone

    from policies.models import Grant
    from policies.tasks import publish_expired_grants

    created = services.create_grant(
        tenant=acme,
        skill_pattern="billing.*",
        agent_role="support",
        granted_by=tenant_admin,
        expires_at=timezone.now() + timedelta(days=1),
    )
    published = latest_snapshot()
    assert [g["skill"] for g in published.body["grants"]] == ["billing.*"]
    assert services.publish_snapshot_if_grants_expired() is None  # not expired yet
    # Time passes: the grant expires just after the snapshot that still lists it.
    Grant.objects.filter(pk=created.pk).update(expires_at=published.created_at + timedelta(microseconds=1))
    count = Snapshot.objects.count()
    snapshot = services.publish_snapshot_if_grants_expired()
    assert snapshot is not None and snapshot.body["grants"] == [] and snapshot.reason == "grant expired"
    assert publish_expired_grants() is False  # already reflected: nothing more to publish
    assert Snapshot.objects.count() == count + 1


@pytest.mark.parametrize(
    "pattern,name,covered",
    [
        ("billing.*", "billing.create_refund_request", True),
        ("billing.*", "billingx.thing", False),
        ("billing.create_refund_request", "billing.create_refund_request", True),
        ("billing.create_refund_request", "billing.create_refund", False),
        ("*", "anything.at_all", True),
    ],
)
def test_grant_patterns(acme, pattern, name, covered):
    assert grant(acme, pattern).covers(name) is covered


def test_expired_grant_is_inactive(acme):
    from datetime import timedelta

    from django.utils import timezone

    from policies.grants import active_patterns

    grant(acme, "docs.*", expires_at=timezone.now() - timedelta(seconds=1))
    grant(acme, "orders.*", expires_at=timezone.now() + timedelta(hours=1))
    assert active_patterns(tenant_id=acme.pk, agent_role="support") == ["orders.*"]


def test_save_draft_refuses_rules_with_errors(acme, tenant_admin):
    policy = services.create_policy(name="p", scope=Scope.TENANT, tenant=acme, created_by=tenant_admin)
    with pytest.raises(services.RulesInvalid) as raised:
        services.save_draft(policy=policy, rules=[rule("a", "allow", "args.x ==")], user=tenant_admin)
    assert "Syntax error" in raised.value.problems[0][0]


def test_publish_refused_while_a_policy_test_fails_then_allowed(acme, tenant_admin):
    policy = services.create_policy(
        name="p",
        scope=Scope.TENANT,
        tenant=acme,
        created_by=tenant_admin,
        rules=[rule("mail", "confirm", 'skill.name == "support.send_email"')],
    )
    services.add_policy_test(
        policy=policy, name="reads are denied", call={}, expected_verdict="deny", user=tenant_admin
    )
    draft = services.draft_of(policy)
    with pytest.raises(services.PolicyError, match="reads are denied"):
        services.publish_policy_version(version=draft, user=tenant_admin)
    draft.refresh_from_db()
    assert draft.status == VersionStatus.DRAFT
    policy.tests.all().delete()
    services.add_policy_test(
        policy=policy,
        name="mail confirms",
        expected_verdict="confirm",
        user=tenant_admin,
        call={"skill": {"name": "support.send_email"}},
    )
    published = services.publish_policy_version(version=draft, user=tenant_admin)
    assert published.status == VersionStatus.PUBLISHED and published.published_by == tenant_admin
    assert latest_snapshot().body["policies"][0]["rules"][0]["id"] == "mail"


def test_rollback_republishes_an_earlier_version_as_new(acme, tenant_admin):
    policy = services.create_policy(
        name="p", scope=Scope.TENANT, tenant=acme, created_by=tenant_admin, rules=[rule("v1", "deny")]
    )
    v1 = services.publish_policy_version(version=services.draft_of(policy), user=tenant_admin)
    services.save_draft(policy=policy, rules=[rule("v2", "allow")], user=tenant_admin)
    v2 = services.publish_policy_version(version=services.draft_of(policy), user=tenant_admin)
    v3 = services.rollback_policy(version=v1, user=tenant_admin)
    statuses = {v.number: v.status for v in policy.versions.all()}
    assert statuses == {1: "superseded", 2: "superseded", 3: "published"}
    assert v3.rules == v1.rules and v3.rolled_back_from == v1 and v2.number == 2


@pytest.fixture
def mail_setup(acme, agent_client):
    make_skill("support.write_note", effect="write", adapter="python:test.echo", publish=False)
    grant(acme, "support.*")
    latest_snapshot()
    make_skill("support.other", adapter="python:test.echo")
    return agent_client


def test_shadow_version_records_would_be_verdict_without_enforcing(acme, tenant_admin, mail_setup):
    policy = services.create_policy(
        name="p",
        scope=Scope.TENANT,
        tenant=acme,
        created_by=tenant_admin,
        rules=[rule("strict", "deny", 'skill.effect == "write"', "no writes")],
    )
    services.publish_policy_version(version=services.draft_of(policy), user=tenant_admin, shadow=True)
    run = start_run(mail_setup)
    body = post_calls(
        mail_setup, run["run_id"], [call("c1", "support.write_note", {"n": 1}), call("c2", "support.other")]
    ).json()
    assert [r["status"] for r in body["results"]] == ["ok", "ok"]  # not enforced
    [shadow] = ToolCall.objects.get(call_id="c1").decision["shadow"]
    assert shadow["verdict"] == "deny" and shadow["differs"] is True and shadow["rule_id"].endswith("/strict")
    assert ToolCall.objects.get(call_id="c2").decision["shadow"][0]["differs"] is False
    differences = services.shadow_differences(policy=policy, user=tenant_admin)
    assert [row["call"].call_id for row in differences] == ["c1"]


def test_simulation_shows_per_call_changes_with_counts(acme, tenant_admin, mail_setup):
    run = start_run(mail_setup)
    post_calls(
        mail_setup,
        run["run_id"],
        [
            call("c1", "support.write_note", {"n": 1}),
            call("c2", "support.write_note", {"n": 2}),
            call("c3", "support.other"),
        ],
    )
    policy = services.create_policy(
        name="p",
        scope=Scope.TENANT,
        tenant=acme,
        created_by=tenant_admin,
        rules=[rule("confirm-writes", "confirm", 'skill.effect == "write" && args.n > 1')],
    )
    simulation = services.simulate_policy(version=services.draft_of(policy), user=tenant_admin, limit=50)
    assert len(simulation.rows) == 3
    assert simulation.counts == {"allow → confirm": 1, "unchanged": 2}
    [changed] = simulation.changed
    assert changed.call.call_id == "c2" and changed.rule_id.endswith("/confirm-writes")


def test_simulation_of_a_skill_policy_only_replays_that_skill(acme, owner, mail_setup):
    run = start_run(mail_setup)
    post_calls(mail_setup, run["run_id"], [call("c1", "support.write_note", {"n": 1}), call("c2", "support.other")])
    policy = services.create_policy(
        name="p", scope=Scope.SKILL, skill_name="support.other", created_by=owner, rules=[rule("d", "deny")]
    )
    simulation = services.simulate_policy(version=services.draft_of(policy), user=owner)
    assert [row.call.call_id for row in simulation.rows] == ["c2"]
    assert simulation.counts == {"allow → deny": 1}
