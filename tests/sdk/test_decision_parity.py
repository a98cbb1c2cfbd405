"""The gate and the SDK decide alike: 5,000 generated calls (random grants, rules, arguments, taint), each
decided by the server through `runs.authorization` on the real rows and by the SDK from the bundle the
server signed, give the same verdict, rule, reason, policy version and floor."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from airlock_sdk.bundles import CachedBundle
from airlock_sdk.local import LocalDecider
from airlock_sdk.policy import kernel
from airlock_sdk.snapshots import verify_signature

from console.models import Tenant
from lib import signing
from policies import bundles
from policies.grants import active_grants
from policies.models import Grant, Policy
from policies.services import load_active_policies, set_local_decisions
from registry.snapshots import latest_index, publish_snapshot
from runs import authorization
from tests.runs.factories import make_skill, published_policy

SEED, WORLDS, CALLS_PER_WORLD = 37, 10, 500

SCHEMA = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0},
        "region": {"type": "string", "enum": ["eu", "us", "apac"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["customer_id"],
}
SKILLS = [  # name, effect, approval, scopes
    ("ws.read_notes", "read", "not_required", []),
    ("ws.draft_reply", "draft", "not_required", []),
    ("ws.write_note", "write", "not_required", ["notes:write"]),
    ("ws.post_update", "external", "not_required", []),
    ("ws.shred", "destructive", "not_required", []),
    ("fin.refund_local", "write", "required", ["refunds"]),
    ("fin.read_ledger", "read", "not_required", ["ledger:read"]),
]
PATTERNS = ["*", "ws.*", "fin.*", "ws.read_notes", "ws.write_note", "fin.refund_local", "ws.post_*", "nothing.*"]
SCOPES = [[], ["notes:write"], ["refunds"], ["ledger:read", "refunds"], ["other"]]
CONDITIONS = [
    "true",
    "args.amount > {n}",
    "has(args.amount) && args.amount > {n}",
    'args.region == "{region}"',
    '"{tag}" in args.tags',
    "run.tainted",
    'skill.effect == "{effect}"',
    'skill.name.startsWith("{namespace}.")',
    'end_user.roles.exists(r, r == "manager")',
    'agent.role == "support" && !run.tainted',
    'args.customer_id.startsWith("vip") || args.amount >= {n}',
    "size(args.tags) > 1",
    'skill.data_class == "internal" && args.customer_id != "c-{n}"',
]


def condition(rng: random.Random) -> str:
    template = rng.choice(CONDITIONS)
    return template.format(
        n=rng.randint(0, 100),
        region=rng.choice(["eu", "us", "apac"]),
        tag=rng.choice(["urgent", "legal", "pii"]),
        effect=rng.choice(["read", "write", "external", "destructive", "draft"]),
        namespace=rng.choice(["ws", "fin"]),
    )


def rules_for(rng: random.Random, scope: str) -> list[dict]:
    rules = []
    for number in range(rng.randint(1, 4)):
        verdict = rng.choice(["allow", "allow", "confirm", "deny"])
        rule = {"id": f"r{number}", "verdict": verdict, "condition": condition(rng), "reason": f"{scope} r{number}"}
        if scope == "platform" and verdict == "allow" and rng.random() < 0.3:
            rule["override_taint"] = True
        rules.append(rule)
    return rules


def new_world(rng: random.Random, acme: Tenant, globex: Tenant) -> None:
    """Random grants for the support role and random published policies of every scope."""
    Grant.objects.all().delete()
    Policy.objects.all().delete()
    for pattern in rng.sample(PATTERNS, rng.randint(0, 4)):
        Grant.objects.create(tenant=acme, agent_role="support", skill_pattern=pattern, oauth_scopes=rng.choice(SCOPES))
    Grant.objects.create(tenant=globex, agent_role="support", skill_pattern="*")  # another tenant's: never counts
    published_policy(rules_for(rng, "platform"), scope="platform", name="platform")
    published_policy(rules_for(rng, "tenant"), scope="tenant", tenant=acme, name="acme")
    published_policy(
        [{"id": "x", "verdict": "deny", "condition": "true", "reason": "globex"}], scope="tenant", tenant=globex
    )
    for name in rng.sample([name for name, *_ in SKILLS], 2):
        published_policy(rules_for(rng, "skill"), scope="skill", skill_name=name, name=f"{name} rules")


def arguments(rng: random.Random) -> dict:
    args: dict = {"customer_id": rng.choice(["c-1", "c-7", "vip-3", f"c-{rng.randint(0, 100)}"])}
    if rng.random() < 0.7:
        args["amount"] = rng.randint(-5, 150)  # below 0 is invalid
    if rng.random() < 0.6:
        args["region"] = rng.choice(["eu", "us", "apac", "mars"])  # mars is invalid
    if rng.random() < 0.6:
        args["tags"] = rng.sample(["urgent", "legal", "pii", "misc"], rng.randint(0, 3))
    if rng.random() < 0.03:
        del args["customer_id"]  # invalid
    return args


def server_decision(skill, run: kernel.RunState, args, grants, policies, *, agent, tenant) -> tuple:
    """What the gate decides: the kernel with the facts the gate builds (runs.authorization, runs.gate._ruling)."""
    ruling = kernel.decide(
        kernel.Facts(
            path=kernel.Path.REST_GATE,
            agent=authorization.agent_facts(agent),
            tenant=authorization.tenant_facts(tenant),
            run=run,
            name=skill.name,
            version=None,
            skill=authorization.skill_facts(skill),
            arguments=args,
            argument_errors=authorization.errors_in(skill, args),
            grants=grants,
            policies=authorization.evaluator(policies, tenant_id=tenant.pk),
        )
    )
    if ruling.refused:
        kind = "invalid" if ruling.refusal.error_class == "validation" else "refused"
        return (kind, ruling.refusal.code, ruling.refusal.message)
    decision = ruling.decision
    return (decision.verdict, decision.rule_id, decision.reason, decision.policy_version, decision.floor_id)


def sdk_decision(verdict) -> tuple:
    if verdict.verdict == "invalid":
        return ("invalid", verdict.error["code"], verdict.error["message"])
    if verdict.verdict == "deny" and not verdict.policy_verdict:
        return ("refused", verdict.error["code"], verdict.error["message"])
    assert verdict.policy_verdict, verdict
    return (verdict.policy_verdict, verdict.rule_id, verdict.reason, verdict.policy_version, verdict.floor_id)


@pytest.mark.django_db
def test_the_gate_and_the_sdk_give_identical_verdicts_and_reasons(acme, globex, agent, settings):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 10**9  # the rate limit has its own test
    for name, effect, approval, scopes in SKILLS:
        make_skill(
            name,
            effect=effect,
            approval=approval,
            scopes=scopes,
            schema=SCHEMA,
            adapter=f"client:{name}",
            publish=False,
        )
    publish_snapshot(reason="parity catalog")
    set_local_decisions(tenant=acme, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="t")
    index = latest_index()
    rng = random.Random(SEED)
    decider = LocalDecider()
    compared, verdicts = 0, set()
    for _ in range(WORLDS):
        new_world(rng, acme, globex)
        signed = bundles.bundle_for(agent)
        verify_signature(signed.body, signed.signature, signing.public_key_pem(), kind="decision bundle")
        bundle = CachedBundle(number=signed.body["number"], body=signed.body, signature=signed.signature)
        grants = active_grants(tenant_id=acme.pk, agent_role="support")
        policies = load_active_policies()
        now = datetime.now(UTC)
        for _ in range(CALLS_PER_WORLD):
            name = rng.choice(SKILLS)[0]
            args = arguments(rng)
            tainted = rng.random() < 0.4
            taint_source = rng.choice(["", "read an inbound e-mail"]) if tainted else ""
            roles = rng.sample(["manager", "agent", "guest"], rng.randint(0, 2))
            run = kernel.RunState(
                end_user="u-1", end_user_roles=tuple(roles), tainted=tainted, taint_source=taint_source
            )
            server = server_decision(index.resolve(name, None), run, args, grants, policies, agent=agent, tenant=acme)
            local = decider.decide(
                bundle,
                name=name,
                version=None,
                arguments=args,
                run_tainted=tainted,
                taint_source=taint_source,
                end_user="u-1",
                end_user_roles=roles,
                now=now,
            )
            assert sdk_decision(local) == server, (name, args, tainted, roles)
            compared += 1
            verdicts.add(server[0])
    assert compared == WORLDS * CALLS_PER_WORLD == 5000
    assert verdicts == {"allow", "confirm", "deny", "refused", "invalid"}  # every kind of answer was compared
