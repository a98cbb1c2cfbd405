"""The CEL policy engine: precedence, defaults by effect, floors, fail-closed conditions, editor checks."""

import pytest

from policies import engine


def compiled(rules, *, scope="tenant", policy_id=1, version=1):
    return engine.CompiledPolicy(
        policy_id=policy_id,
        name="p",
        scope=scope,
        tenant_id=1,
        skill_name="",
        version_id=None,
        version_number=version,
        rules=engine.compile_rules(rules),
    )


def r(rule_id, verdict, condition="true"):
    return {"id": rule_id, "verdict": verdict, "condition": condition, "reason": f"{rule_id} reason"}


def ctx(effect="write", tainted=False, **overrides):
    return engine.sample_context(
        skill={"name": "support.send_email", "effect": effect, "namespace": "support"},
        run={"tainted": tainted, "taint_source": "x" if tainted else ""},
        **overrides,
    )


@pytest.mark.parametrize(
    "rules,expected,rule",
    [
        ([r("a", "allow"), r("c", "confirm"), r("d", "deny")], "deny", "p1/d"),
        ([r("a", "allow"), r("c", "confirm")], "confirm", "p1/c"),
        ([r("c1", "confirm"), r("c2", "confirm")], "confirm", "p1/c1"),
        ([r("a", "allow")], "allow", "p1/a"),
        ([r("d", "deny", "false"), r("a", "allow")], "allow", "p1/a"),
        ([r("d", "deny", 'args.to.endsWith("@acme.example")'), r("a", "allow")], "deny", "p1/d"),
        ([], "allow", "default:write"),
    ],
)
def test_precedence_deny_then_confirm_then_allow(rules, expected, rule):
    decision = engine.evaluate(context=ctx(args={"to": "bob@acme.example"}), policies=[compiled(rules)])
    assert (decision.verdict, decision.rule_id) == (expected, rule)


def test_precedence_across_scopes_and_decision_carries_provenance():
    platform = compiled([r("allow-all", "allow")], scope="platform", policy_id=7, version=3)
    tenant = compiled([r("no-mail", "confirm", 'skill.name == "support.send_email"')], policy_id=9, version=2)
    decision = engine.evaluate(context=ctx(), policies=[platform, tenant])
    assert decision.as_dict() | {} == {
        "verdict": "confirm",
        "rule_id": "p9/no-mail",
        "scope": "tenant",
        "policy_version": "p9@v2",
        "reason": "no-mail reason",
        "policy_name": "p",
    }


@pytest.mark.parametrize(
    "effect,tainted,verdict",
    [
        ("read", False, "allow"),
        ("read", True, "allow"),
        ("draft", False, "allow"),
        ("draft", True, "allow"),
        ("write", False, "allow"),
        ("write", True, "confirm"),
        ("external", False, "confirm"),
        ("external", True, "confirm"),
        ("destructive", False, "confirm"),
        ("destructive", True, "confirm"),
    ],
)
def test_defaults_by_effect(effect, tainted, verdict):
    assert engine.evaluate(context=ctx(effect, tainted), policies=[]).verdict == verdict


def test_destructive_is_never_plain_allow_even_with_allow_rule():
    decision = engine.evaluate(context=ctx("destructive"), policies=[compiled([r("yes", "allow")])])
    assert decision.verdict == "confirm" and "destructive" in decision.floor


def test_approval_required_forces_at_least_confirm_but_not_over_deny():
    assert engine.evaluate(context=ctx("read"), policies=[], approval_required=True).verdict == "confirm"
    deny = compiled([r("d", "deny")])
    assert engine.evaluate(context=ctx("read"), policies=[deny], approval_required=True).verdict == "deny"


@pytest.mark.parametrize("verdict,matched", [("deny", True), ("confirm", True), ("allow", False)])
def test_condition_that_fails_at_runtime_fails_closed(verdict, matched):
    policy = compiled([r("x", verdict, "args.amount > 100")])  # args has no amount: KeyError at runtime
    decision = engine.evaluate(context=ctx("read"), policies=[policy])
    assert (decision.rule_id == "p1/x") is matched
    assert decision.errors


@pytest.mark.parametrize(
    "condition,message",
    [
        ("args.to.endsWith(", "Syntax error"),
        ("1 + 'a' == 2", "Type error"),
        ("agentt.role == 'x'", "Known variables"),
        ("skill.name", "true or false"),
        ("", "empty"),
    ],
)
def test_check_condition_reports_errors(condition, message):
    [error] = engine.check_condition(condition)
    assert message in error


@pytest.mark.parametrize(
    "condition",
    [
        'args.to.endsWith("@acme.example")',
        "run.tainted && skill.namespace == 'admin'",
        "'admin' in end_user.roles",
        "has(args.amount) && args.amount > 100",
        "agent.role == 'support'",
    ],
)
def test_check_condition_accepts_documented_context(condition):
    assert engine.check_condition(condition) == []


def test_end_user_roles_defend_against_confused_deputy():
    policy = compiled([r("admins-only", "deny", "skill.namespace == 'admin' && !('admin' in end_user.roles)")])
    low = ctx("read", end_user={"id": "u-1", "roles": ["customer"]})
    low["skill"]["namespace"] = "admin"
    high = ctx("read", end_user={"id": "u-2", "roles": ["admin"]})
    high["skill"]["namespace"] = "admin"
    assert engine.evaluate(context=low, policies=[policy]).verdict == "deny"
    assert engine.evaluate(context=high, policies=[policy]).verdict == "allow"


def test_compiled_once_per_version():
    engine.clear_cache()
    rules = [r("a", "allow")]
    first = engine.compile_rules(rules, version_id=42)
    assert engine.compile_rules([dict(rules[0])], version_id=42) is first
    assert engine.compile_rules([r("b", "deny")], version_id=42) is not first  # a reused id is recompiled
