"""The rule index must never change a decision: every Decision (verdict, deciding rule, reason, floors,
errors) from the indexed engine equals the one from the same engine with `indexed=False`, which runs
every rule in CEL against the whole context. The rules here aim at the index: `||`, `!=`, `in`,
missing fields, literals inside nested expressions, guards beside conjuncts that fail or raise."""

from __future__ import annotations

import random

import cel
import pytest
from airlock_sdk.policy.rule_index import Guard, guards_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import engine


def compiled(rules, *, policy_id=1, scope="tenant"):
    return engine.CompiledPolicy(
        policy_id=policy_id,
        name=f"p{policy_id}",
        scope=scope,
        tenant_id=1,
        skill_name="",
        version_id=None,
        version_number=1,
        rules=engine.compile_rules(rules),
    )


def rule(index, verdict, condition):
    return {"id": f"r{index}", "verdict": verdict, "condition": condition, "reason": f"reason {index}"}


def both(context, policies, approval_required=False):
    indexed = engine.evaluate(context=context, policies=policies, approval_required=approval_required)
    reference = engine.evaluate(context=context, policies=policies, approval_required=approval_required, indexed=False)
    return indexed, reference


def ctx(**parts):
    base = {
        "skill": {"name": "a.x", "version": "1.0.0", "effect": "write", "data_class": "internal", "namespace": "a"},
        "args": {},
        "agent": {"id": 1, "name": "bot", "role": "ops"},
        "end_user": {"id": "u-1", "roles": []},
        "tenant": {"slug": "acme"},
        "run": {"tainted": False, "taint_source": ""},
    }
    for key, value in parts.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key != "args" else value
    return base


# What the index relies on in the CEL binding --------------------------------------------------------


@pytest.mark.parametrize(
    "failing",
    ["args.missing == 1", "1 / args.zero == 1", 'skill.name.matches("[")', "skill.name > 1", "undeclared == 1"],
)
def test_a_false_conjunct_makes_a_conjunction_false_even_beside_an_error(failing):
    """`&&` is commutative here, errors included: the index may skip a rule on any false conjunct."""
    context = cel.Context({"args": {"zero": 0}, "skill": {"name": "a.x"}})
    for condition in (f"{failing} && false", f"false && {failing}", f"({failing} && true) && false"):
        assert cel.compile(condition).execute(context) is False
    with pytest.raises(Exception):  # noqa: B017 - any error: alone, the failing conjunct fails
        cel.compile(f"{failing} && true").execute(context)


# Reading guards off conditions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "condition,expected",
    [
        ('skill.name == "a.x" && args.n > 1', [Guard("eq", ("skill", "name"), "a.x")]),
        ("'a.x' == skill.name", [Guard("eq", ("skill", "name"), "a.x")]),
        ('skill.namespace != "a"', [Guard("ne", ("skill", "namespace"), "a")]),
        ('"admin" in end_user.roles', [Guard("in", ("end_user", "roles"), "admin")]),
        ("has(args.meta.tag)", [Guard("has", ("args", "meta"), "tag")]),
        ("!run.tainted && run.tainted", [Guard("false", ("run", "tainted")), Guard("true", ("run", "tainted"))]),
        (
            '(agent.role == "ops" && (skill.effect == "write")) && true',
            [
                Guard("eq", ("agent", "role"), "ops"),
                Guard("eq", ("skill", "effect"), "write"),
            ],
        ),
        (
            'skill.name == "a && b || c" && agent.role == "x)"',
            [
                Guard("eq", ("skill", "name"), "a && b || c"),
                Guard("eq", ("agent", "role"), "x)"),
            ],
        ),
        (
            '(skill.name == "a.x" || agent.role == "ops") && tenant.slug == "acme"',
            [Guard("eq", ("tenant", "slug"), "acme")],
        ),
        ('skill.name == "a.x" || agent.role == "ops"', []),
        ('skill.name == "a.x" ? true : false', []),
        ('!(skill.name == "a.x")', []),
        ('[skill.name].exists(n, n == "a.x")', []),
        ('skill.name == "a.x" == true', []),
        ('"a." + skill.name == "a.a.x"', []),
        ('skill.name == "a\\x2ex"', []),  # escapes are left to CEL
        ('skill.name == r"a.x"', []),
        ('r"\\" == skill.name || agent.role == "ops" && skill.name == "zz"', []),
        ('skill.name == """a.x"""', []),
        ('skill.name == "a.x" // a comment && agent.role == "ops"', []),
        ('unknown.name == "a.x"', []),
        ('skill.name in ["a.x"]', []),
    ],
)
def test_guards_are_read_only_from_top_level_conjuncts(condition, expected):
    assert list(guards_of(condition)) == expected


# The indexed engine against every rule in CEL --------------------------------------------------------

ATTACK_RULES = [
    ("deny", 'skill.name == "a.x" && args.amount > 100'),  # the literal matches, the other conjunct decides
    ("confirm", 'skill.name == "a.x" || agent.role == "admin"'),
    ("allow", 'skill.namespace != "a"'),
    ("confirm", '"admin" in end_user.roles && skill.effect == "write"'),
    ("allow", 'skill.owner == "x"'),  # a field no context has: an error, recorded, never a match
    ("allow", 'args.to.endsWith("@acme.example")'),  # errors when args has no `to`
    ("deny", 'has(args.to) && args.to.endsWith("@evil.example")'),
    ("confirm", '(skill.name == "a.x" || skill.name == "a.y") && args.amount > 5'),
    ("deny", '!(skill.name == "b.z") && run.tainted && agent.role == "ops"'),
    ("confirm", '[skill.name].exists(n, n == "b.z") && has(args.amount)'),
    ("allow", 'args.missing.deep == 1 && skill.name == "b.z"'),  # error beside a false guard
    ("deny", 'skill.name == "a.x" && args.amount > 100 && agent.role == "support"'),
    ("confirm", 'skill.name.startsWith("b.") && !run.tainted'),
    ("allow", 'args.to.contains("@") && tenant.slug == "acme"'),
    ("deny", 'has(args.meta.tag) && args.meta.tag == "x"'),
    ("confirm", 'skill.name == "a.x" ? args.amount > 1 : agent.role == "ops"'),
    ("allow", "args.items.all(i, i.qty > 0) && skill.effect == 'write'"),
    ("deny", 'cel.bind(n, skill.name, n == "a.y") && end_user.roles.size() > 0'),
]


def attack_contexts(count=400, seed=11):
    rng = random.Random(seed)
    missing = object()
    choices = {
        ("skill", "name"): ["a.x", "a.y", "b.z", "a && b", 7, missing],
        ("skill", "namespace"): ["a", "b", None, missing],
        ("skill", "effect"): ["read", "write", "external", "destructive"],
        ("agent", "role"): ["ops", "support", "admin", 1, missing],
        ("end_user", "roles"): [[], ["admin"], ["ops", "admin"], [1, "admin"], "admin", ("admin",), missing],
        ("run", "tainted"): [True, False, 1, "yes"],
        ("tenant", "slug"): ["acme", "globex", missing],
    }
    arg_choices = {
        "amount": [0, 50, 150, "150", 2.5, None, missing],
        "to": ["x@acme.example", "y@evil.example", "nobody", 5, missing],
        "meta": [{"tag": "x"}, {"tag": "y"}, {}, "x", missing],
        "items": [[{"qty": 1}], [{"qty": 0}], [{}], [], missing],
    }
    contexts = []
    for _ in range(count):
        context = ctx()
        for (root, name), values in choices.items():
            value = rng.choice(values)
            if value is missing:
                context[root].pop(name, None)
            else:
                context[root][name] = value
        args = {name: value for name, values in arg_choices.items() if (value := rng.choice(values)) is not missing}
        context["args"] = rng.choice([args, args, args, [], "args"])
        contexts.append(context)
    return contexts


def attack_policies(seed):
    rng = random.Random(seed)
    shuffled = [rule(i, verdict, condition) for i, (verdict, condition) in enumerate(ATTACK_RULES)]
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    return [compiled(shuffled[:half], policy_id=1, scope="platform"), compiled(shuffled[half:], policy_id=2)]


@pytest.mark.parametrize("seed", range(6))
def test_indexed_decisions_equal_every_rule_evaluated(seed):
    policies = attack_policies(seed)
    decided = set()
    for context in attack_contexts(seed=seed):
        indexed, reference = both(context, policies, approval_required=seed % 2 == 1)
        assert indexed == reference, context
        decided.add((indexed.rule_id, bool(indexed.errors)))
    assert len(decided) > 6, decided  # the contexts reach many rules, with and without errors


def test_one_rule_at_a_time_against_every_context():
    """Alone, each rule shows its own match, miss or error, with nothing above it to hide them."""
    contexts = attack_contexts(count=150, seed=3)
    for index, (verdict, condition) in enumerate(ATTACK_RULES):
        policies = [compiled([rule(index, verdict, condition)])]
        for context in contexts:
            indexed, reference = both(context, policies)
            assert indexed == reference, (condition, context)


def test_the_literal_matching_is_not_enough_when_the_other_conjunct_fails():
    policies = [compiled([rule(1, "deny", 'skill.name == "a.x" && args.amount > 100')])]
    small, missing, large = (ctx(args={"amount": 5}), ctx(args={}), ctx(args={"amount": 500}))
    assert both(small, policies)[0].rule_id == "default:write"
    assert both(large, policies)[0].rule_id == "p1/r1"
    indexed, reference = both(missing, policies)
    assert indexed == reference and indexed.rule_id == "p1/r1" and indexed.errors == ["p1@v1/r1: KeyError"]


def test_an_error_beside_a_false_guard_is_not_recorded_either_way():
    policies = [compiled([rule(1, "deny", 'args.missing.deep == 1 && skill.name == "b.z"')])]
    indexed, reference = both(ctx(), policies)
    assert indexed == reference and indexed.errors == [] and indexed.rule_id == "default:write"


def test_guard_answers_remembered_for_one_value_are_not_reused_for_another_type():
    """The index remembers what a str value rules out; 1, True and "1" must not share an answer."""
    policies = [compiled([rule(1, "deny", 'agent.role == "1" && true'), rule(2, "confirm", "run.tainted && true")])]
    for role in ("1", 1, True, "2", "1", 1):
        for tainted in (True, 1, "True", False, True):
            indexed, reference = both(ctx(agent={"role": role}, run={"tainted": tainted}), policies)
            assert indexed == reference, (role, tainted)


def test_a_value_cel_cannot_convert_still_refuses_the_decision_when_a_rule_reads_it():
    policies = [compiled([rule(1, "allow", "size(args.note) > 0")])]
    context = ctx(args={"note": "\ud800"})
    for indexed in (True, False):
        with pytest.raises(ValueError):
            engine.evaluate(context=context, policies=policies, indexed=indexed)


def test_long_argument_values_are_answered_but_never_kept():
    """Arguments are the agent's: ten thousand distinct long values must not pile up in the index."""
    policies = [compiled([rule(1, "deny", 'args.to.endsWith("@evil.example") && args.to == "x"')])]
    for number in range(10_000):
        context = ctx(args={"to": f"{number:0300d}@evil.example"})
        assert engine.evaluate(context=context, policies=policies).rule_id == "default:write"
    short = ctx(args={"to": "x"})
    assert both(short, policies)[0] == both(short, policies)[1]
    kept = [value for path_guards in policies[0].index.paths for value in path_guards.known]
    assert kept == ["x"]


def test_the_index_is_built_once_per_cached_version():
    engine.clear_cache()
    rules = [rule(1, "deny", 'skill.name == "a.x"')]
    first = engine.compile_rules(rules, version_id=77)
    assert engine.index_rules(first, version_id=77) is engine.index_rules(first, version_id=77)
    draft = engine.compile_rules(rules)  # same id, not that version's compilation: indexed apart
    assert engine.index_rules(draft, version_id=77) is not engine.index_rules(first, version_id=77)
    engine.clear_cache()


# Generated conditions ---------------------------------------------------------------------------------

ATOMS = [
    'skill.name == "a.x"',
    '"a.y" == skill.name',
    "skill.name != 'a.x'",
    'skill.namespace == "a"',
    'skill.effect == "write"',
    'agent.role == "ops"',
    '"admin" in end_user.roles',
    "has(args.to)",
    "has(args.meta.tag)",
    'args.to.endsWith("@acme.example")',
    'skill.name.startsWith("a.")',
    'args.to.contains("@")',
    "run.tainted",
    "!run.tainted",
    "args.amount > 100",
    "args.missing == 1",
    "1 / args.amount > 0",
    'args.to.matches("[")',
    "true",
    "false",
    'skill.name == "a && b"',
    '[skill.name].exists(n, n == "a.x")',
]

conditions = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda pair: f"{pair[0]} && {pair[1]}"),
        st.tuples(inner, inner).map(lambda pair: f"({pair[0]} || {pair[1]})"),
        st.tuples(inner, inner).map(lambda pair: f"({pair[0]}) && ({pair[1]})"),
        inner.map(lambda condition: f"!({condition})"),
        st.tuples(inner, inner, inner).map(lambda three: f"({three[0]} ? {three[1]} : {three[2]})"),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.lists(st.tuples(st.sampled_from(engine.VERDICTS), conditions), min_size=1, max_size=5),
    seed=st.integers(0, 1000),
)
def test_generated_conditions_decide_as_with_every_rule_evaluated(rules, seed):
    policies = [compiled([rule(i, verdict, condition) for i, (verdict, condition) in enumerate(rules)])]
    for context in attack_contexts(count=12, seed=seed):
        indexed, reference = both(context, policies)
        assert indexed == reference, (rules, context)
