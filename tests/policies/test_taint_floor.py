"""Taint is a floor, not a default: once a run read untrusted content, an allow rule no longer lets a
write, external or destructive call through without a person; only a platform rule that says
`override_taint` lowers that floor. Written from the attacker's side."""

import pytest
from django.urls import reverse

from policies import engine, services
from policies.models import PolicyVersion, Scope
from registry.snapshots import latest_snapshot
from runs.models import ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule


def compiled(rules, *, scope="tenant", policy_id=1):
    return engine.CompiledPolicy(
        policy_id=policy_id,
        name="p",
        scope=scope,
        tenant_id=1,
        skill_name="",
        version_id=None,
        version_number=1,
        rules=engine.compile_rules(rules),
    )


def r(rule_id, verdict, condition="true", **extra):
    return {"id": rule_id, "verdict": verdict, "condition": condition, "reason": f"{rule_id} reason", **extra}


def ctx(effect="write", tainted=True):
    return engine.sample_context(
        skill={"name": "support.write_note", "effect": effect, "namespace": "support"},
        run={"tainted": tainted, "taint_source": "read inbound email" if tainted else ""},
    )


# The engine -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("effect", ["write", "external"])
def test_tainted_write_or_external_with_tenant_allow_rule_is_raised_to_confirm(effect):
    decision = engine.evaluate(context=ctx(effect), policies=[compiled([r("notes-ok", "allow")])])
    assert (decision.verdict, decision.rule_id, decision.floor_id) == ("confirm", "p1/notes-ok", "floor:taint")
    assert "untrusted content (read inbound email)" in decision.floor
    assert decision.as_dict()["floor_id"] == "floor:taint" and "taint_overridden_by" not in decision.as_dict()


def test_tainted_destructive_with_allow_rule_is_still_confirm():
    decision = engine.evaluate(context=ctx("destructive"), policies=[compiled([r("yes", "allow")])])
    assert decision.verdict == "confirm"


@pytest.mark.parametrize("effect", ["read", "draft"])
def test_reads_and_drafts_are_unaffected_by_taint(effect):
    decision = engine.evaluate(context=ctx(effect), policies=[compiled([r("yes", "allow")])])
    assert (decision.verdict, decision.floor) == ("allow", "")


def test_untainted_write_with_allow_rule_is_allowed():
    decision = engine.evaluate(context=ctx("write", tainted=False), policies=[compiled([r("yes", "allow")])])
    assert (decision.verdict, decision.floor) == ("allow", "")


def test_platform_rule_with_override_taint_lowers_the_floor_and_says_so():
    platform = compiled([r("trusted-notes", "allow", override_taint=True)], scope="platform", policy_id=3)
    decision = engine.evaluate(context=ctx("write"), policies=[platform])
    assert decision.verdict == "allow"
    assert decision.as_dict()["taint_overridden_by"] == "p3/trusted-notes"
    assert "floor" not in decision.as_dict()


@pytest.mark.parametrize("scope", ["tenant", "skill"])
def test_override_taint_outside_platform_scope_is_ignored_by_the_engine(scope):
    # Defence in depth: the editor refuses this, but a rule that got in anyway does not lower the floor.
    smuggled = compiled([r("sneaky", "allow", override_taint=True)], scope=scope)
    decision = engine.evaluate(context=ctx("write"), policies=[smuggled])
    assert (decision.verdict, decision.floor_id) == ("confirm", "floor:taint")
    assert "taint_overridden_by" not in decision.as_dict()


def test_override_taint_must_be_a_real_boolean_to_count():
    stringly = compiled([r("str", "allow", override_taint="true")], scope="platform")
    assert engine.evaluate(context=ctx("write"), policies=[stringly]).verdict == "confirm"


def test_override_taint_counts_only_on_the_deciding_rule():
    # A tenant allow rule recorded before the platform one: the override is not the deciding rule's.
    tenant = compiled([r("tenant-ok", "allow")], scope="tenant", policy_id=1)
    platform = compiled([r("trusted", "allow", override_taint=True)], scope="platform", policy_id=2)
    assert engine.evaluate(context=ctx("write"), policies=[tenant, platform]).verdict == "confirm"
    assert engine.evaluate(context=ctx("write"), policies=[platform, tenant]).verdict == "allow"


@pytest.mark.parametrize(
    "effect,approval_required,floor_id",
    [
        ("destructive", False, "floor:destructive"),
        ("write", True, "floor:approval_required"),
    ],
)
def test_override_taint_never_lowers_the_destructive_or_approval_floors(effect, approval_required, floor_id):
    platform = compiled([r("trusted", "allow", override_taint=True)], scope="platform", policy_id=3)
    decision = engine.evaluate(context=ctx(effect), policies=[platform], approval_required=approval_required)
    assert (decision.verdict, decision.floor_id) == ("confirm", floor_id)
    assert "taint_overridden_by" not in decision.as_dict()


@pytest.mark.parametrize(
    "other_rules",
    [
        [r("x", "confirm")],
        [],
    ],
)
def test_deny_beats_everything(other_rules):
    platform = compiled([r("trusted", "allow", override_taint=True)], scope="platform", policy_id=3)
    tenant = compiled([*other_rules, r("no", "deny")], policy_id=4)
    decision = engine.evaluate(context=ctx("write"), policies=[platform, tenant], approval_required=True)
    assert (decision.verdict, decision.rule_id, decision.floor) == ("deny", "p4/no", "")


def test_a_confirm_rule_is_not_lowered_by_a_platform_override():
    platform = compiled([r("trusted", "allow", override_taint=True)], scope="platform", policy_id=3)
    tenant = compiled([r("ask", "confirm")], policy_id=4)
    decision = engine.evaluate(context=ctx("write"), policies=[platform, tenant])
    assert (decision.verdict, decision.rule_id, decision.taint_overridden_by) == ("confirm", "p4/ask", "")


def test_compiled_rule_keeps_override_taint():
    [kept, plain] = engine.compile_rules([r("a", "allow", override_taint=True), r("b", "allow")])
    assert kept.override_taint is True and plain.override_taint is False


# Saving and publishing --------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["tenant", "skill"])
def test_check_rules_refuses_override_taint_outside_platform(scope):
    problems = engine.check_rules([r("sneaky", "allow", override_taint=True)], scope=scope)
    assert "Only a platform policy may lower the taint floor" in problems[0][0]


@pytest.mark.parametrize(
    "rule_,message",
    [
        (r("a", "allow", override_taint="yes"), "true or false"),
        (r("a", "deny", override_taint=True), "only means something on an allow rule"),
    ],
)
def test_check_rules_refuses_malformed_override_taint(rule_, message):
    assert message in engine.check_rules([rule_], scope="platform")[0][0]


def test_check_rules_accepts_override_taint_on_a_platform_allow_rule():
    assert (
        engine.check_rules(
            [r("a", "allow", override_taint=True), r("b", "allow", override_taint=False)], scope="platform"
        )
        == {}
    )


@pytest.mark.django_db
def test_tenant_policy_cannot_save_or_publish_override_taint(acme, tenant_admin):
    policy = services.create_policy(name="p", scope=Scope.TENANT, tenant=acme, created_by=tenant_admin)
    with pytest.raises(services.RulesInvalid, match="Only a platform policy"):
        services.save_draft(policy=policy, rules=[r("sneaky", "allow", override_taint=True)], user=tenant_admin)
    with pytest.raises(services.RulesInvalid, match="Only a platform policy"):
        services.create_policy(
            name="q",
            scope=Scope.TENANT,
            tenant=acme,
            created_by=tenant_admin,
            rules=[r("sneaky", "allow", override_taint=True)],
        )
    draft = services.draft_of(policy)  # written around the service: publishing still refuses it
    draft.rules = [r("sneaky", "allow", override_taint=True)]
    draft.save(update_fields=["rules"])
    with pytest.raises(services.RulesInvalid, match="Only a platform policy"):
        services.publish_policy_version(version=draft, user=tenant_admin)


@pytest.mark.django_db
def test_platform_override_is_stored_published_and_in_the_snapshot(platform_admin):
    policy = services.create_policy(name="trusted", scope=Scope.PLATFORM, created_by=platform_admin)
    draft = services.save_draft(
        policy=policy,
        user=platform_admin,
        rules=[r("trusted", "allow", 'skill.name == "support.write_note"', override_taint=True), r("plain", "allow")],
    )
    assert draft.rules[0]["override_taint"] is True and "override_taint" not in draft.rules[1]
    services.publish_policy_version(version=draft, user=platform_admin)
    [section] = latest_snapshot().body["policies"]
    assert section["scope"] == "platform" and section["rules"][0]["override_taint"] is True
    [active] = services.load_active_policies().published
    assert active.rules[0].override_taint is True and active.rules[1].override_taint is False


# The editor -------------------------------------------------------------------------------------------


def _editor_post(**extra) -> dict:
    return {
        "rule_id": ["trusted", "plain", ""],
        "verdict": ["allow", "allow", "allow"],
        "condition": ["true", "true", ""],
        "reason": ["trusted writes", "plain", ""],
        **extra,
    }


@pytest.mark.django_db
def test_platform_editor_shows_the_checkbox_and_warning_and_saves_it(client, platform_admin):
    policy = services.create_policy(name="trusted", scope=Scope.PLATFORM, created_by=platform_admin)
    login(client, platform_admin)
    page = client.get(reverse("policies:policy_detail", args=[policy.pk])).content.decode()
    assert 'name="override_taint"' in page and "Override taint" in page and "still need a person" in page
    response = client.post(reverse("policies:draft_save", args=[policy.pk]), _editor_post(override_taint=["0"]))
    assert response.status_code == 302
    rules = services.draft_of(policy).rules
    assert rules[0]["override_taint"] is True and "override_taint" not in rules[1]
    page = client.get(reverse("policies:policy_detail", args=[policy.pk])).content.decode()
    assert 'value="0" aria-label="Override taint" checked' in page


@pytest.mark.django_db
def test_tenant_editor_has_no_checkbox_and_refuses_a_forged_one(client, acme, tenant_admin):
    policy = services.create_policy(name="p", scope=Scope.TENANT, tenant=acme, created_by=tenant_admin)
    login(client, tenant_admin)
    page = client.get(reverse("policies:policy_detail", args=[policy.pk])).content.decode()
    assert 'name="override_taint"' not in page
    response = client.post(reverse("policies:draft_save", args=[policy.pk]), _editor_post(override_taint=["0"]))
    assert response.status_code == 400
    page = response.content.decode()
    assert "Only a platform policy may lower the taint floor" in page
    assert 'value="0" aria-label="Override taint" checked' in page  # shown so that it can be unticked
    assert PolicyVersion.objects.get(policy=policy).rules == []


# Through the real gate --------------------------------------------------------------------------------


@pytest.fixture
def notes(acme):
    make_skill("support.write_note", effect="write", adapter="python:test.echo", publish=False)
    make_skill("support.send_email", effect="external", adapter="python:test.echo", publish=False)
    make_skill("support.read_inbox", adapter="python:test.echo", untrusted_output=True, publish=False)
    make_skill("support.peek", adapter="python:test.echo", publish=False)
    grant(acme, "support.*")
    published_policy(
        [rule("support-may-write", "allow", 'skill.namespace == "support"')],
        scope="tenant",
        tenant=acme,
        name="routine allows",
    )
    latest_snapshot()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "first",
    [
        call("c1", "support.peek", taint="read a customer email"),
        call("c1", "support.read_inbox"),
    ],
)
def test_gate_tainted_batch_with_tenant_allow_rule_asks_for_the_write(agent_client, notes, first):
    run = start_run(agent_client)
    body = post_calls(
        agent_client,
        run["run_id"],
        [
            first,
            call("c2", "support.write_note", {"text": "hi"}),
            call("c3", "support.send_email", {"to": "x@evil.example"}),
        ],
    )
    assert body.status_code == 200, body.content
    assert [x["status"] for x in body.json()["results"]] == ["ok", "approval_required", "approval_required"]
    decision = ToolCall.objects.get(call_id="c2").decision
    assert decision["rule_id"].endswith("/support-may-write") and decision["floor_id"] == "floor:taint"
    assert "untrusted content" in body.json()["results"][1]["reason"]


@pytest.mark.django_db
def test_gate_untainted_write_with_tenant_allow_rule_runs(agent_client, notes):
    run = start_run(agent_client)
    body = post_calls(agent_client, run["run_id"], [call("c1", "support.write_note", {"text": "hi"})]).json()
    assert body["results"][0]["status"] == "ok" and body["tainted"] is False


@pytest.mark.django_db
def test_gate_platform_override_lets_the_tainted_write_run(agent_client, notes):
    platform = published_policy(
        [rule("trusted-notes", "allow", 'skill.name == "support.write_note"') | {"override_taint": True}],
        name="trusted notes",
    )
    run = start_run(agent_client)
    body = post_calls(
        agent_client,
        run["run_id"],
        [
            call("c1", "support.peek", taint=True),
            call("c2", "support.write_note", {"text": "hi"}),
            call("c3", "support.send_email", {"to": "x@evil.example"}),
        ],
    )
    assert [x["status"] for x in body.json()["results"]] == ["ok", "ok", "approval_required"]
    decision = ToolCall.objects.get(call_id="c2").decision
    assert decision["taint_overridden_by"] == f"p{platform.pk}/trusted-notes" and "floor" not in decision
