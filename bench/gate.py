"""Policy gate benchmark.

1. Policy evaluation per decision (µs, p50/p99) for one policy of 50 CEL rules, and the same 50
   rules written for Cedar (cedarpy, pre-parsed PolicySet) on the same decisions, as a ratio.
   Both paths return the same verdict for every decision (checked, and reported).
2. Gate API latency (ms, p50/p99) and throughput through the production process model (Granian WSGI
   with one worker behind the nginx front door, on loopback, DEBUG off, its own SQLite database) for
   single read calls and 10-call read batches,
   each call passing the same 50-rule policy.

Run alone: `.venv/bin/python -m bench.gate`; `make bench` runs it with the others.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Figure, percentile, print_table, production_model, server_env

ROOT = Path(__file__).resolve().parent.parent
RULES = 50
DECISIONS = 2000
SINGLE_CALLS = 300
BATCHES = 100
BATCH_SIZE = 10
CONCURRENT_CLIENTS = 8
RANK = {"allow": 0, "confirm": 1, "deny": 2}


# The same 50 rules in both languages ----------------------------------------------------------------


def rule_pairs(count: int = RULES) -> list[tuple[str, str, str]]:
    """(verdict, CEL condition, Cedar condition) — five shapes of condition, cycled."""
    pairs = []
    for i in range(count):
        k = i % 5
        verdict = "deny" if i % 7 == 0 else "confirm" if i % 3 == 0 else "allow"
        shape = i % 5
        if shape == 0:
            cel = f'skill.name == "ns{k}.tool{i}" && has(args.amount) && args.amount > {i * 100}'
            cedar = (
                f'context.skill.name == "ns{k}.tool{i}" && context.args has amount && context.args.amount > {i * 100}'
            )
        elif shape == 1:
            cel = f'skill.namespace == "ns{k}" && run.tainted && skill.effect == "write"'
            cedar = f'context.skill.namespace == "ns{k}" && context.run.tainted && context.skill.effect == "write"'
        elif shape == 2:
            cel = f'"role{i % 9}" in end_user.roles && skill.effect == "write" && skill.namespace == "ns{k}"'
            cedar = (
                f'context.end_user.roles.contains("role{i % 9}") && context.skill.effect == "write" '
                f'&& context.skill.namespace == "ns{k}"'
            )
        elif shape == 3:
            cel = f'has(args.to) && args.to.endsWith("@ext{i}.example")'
            cedar = f'context.args has to && context.args.to like "*@ext{i}.example"'
        else:
            cel = f'agent.role == "role{i % 4}" && skill.data_class == "restricted" && skill.namespace == "ns{k}"'
            cedar = (
                f'context.agent.role == "role{i % 4}" && context.skill.data_class == "restricted" '
                f'&& context.skill.namespace == "ns{k}"'
            )
        pairs.append((verdict, cel, cedar))
    return pairs


def cel_rules() -> list[dict]:
    return [
        {"id": f"r{i}", "verdict": v, "condition": cel, "reason": f"bench rule {i}"}
        for i, (v, cel, _) in enumerate(rule_pairs())
    ]


def cedar_text() -> str:
    return "\n".join(f"permit(principal, action, resource) when {{ {cedar} }};" for _, _, cedar in rule_pairs())


def decisions(count: int = DECISIONS, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    contexts = []
    for _ in range(count):
        i, k = rng.randrange(RULES), rng.randrange(5)
        args: dict = {}
        if rng.random() < 0.5:
            args["amount"] = rng.randrange(0, 6000)
        if rng.random() < 0.4:
            args["to"] = f"someone@ext{rng.randrange(RULES)}.example"
        contexts.append(
            {
                "skill": {
                    "name": f"ns{k}.tool{i}",
                    "version": "1.0.0",
                    "namespace": f"ns{k}",
                    "effect": rng.choice(["read", "draft", "write", "external"]),
                    "data_class": rng.choice(["internal", "confidential", "restricted"]),
                },
                "args": args,
                "agent": {"id": 1, "name": "bench", "role": f"role{rng.randrange(4)}"},
                "end_user": {"id": "u-1", "roles": [f"role{rng.randrange(9)}" for _ in range(rng.randrange(3))]},
                "tenant": {"slug": "bench"},
                "run": {"tainted": rng.random() < 0.3, "taint_source": ""},
            }
        )
    return contexts


def _us(start: int) -> float:
    return (time.perf_counter_ns() - start) / 1000


def bench_policy_engines() -> list[Figure]:
    import cedarpy

    from policies import engine

    policy = engine.CompiledPolicy(
        policy_id=1,
        name="bench",
        scope="tenant",
        tenant_id=1,
        skill_name="",
        version_id=10**9,
        version_number=1,
        rules=engine.compile_rules(cel_rules(), version_id=10**9),
    )
    policy_set = cedarpy.PolicySet.from_str(cedar_text())
    entities = cedarpy.Entities.from_json_str("[]")
    verdict_of_rule = [v for v, _, _ in rule_pairs()]
    contexts = decisions()

    def cedar_decide(ctx: dict) -> str:
        request = {"principal": 'Agent::"1"', "action": 'Action::"call"', "resource": 'Skill::"s"', "context": ctx}
        reasons = cedarpy.is_authorized(request, policy_set, entities).diagnostics.reasons
        matched = [verdict_of_rule[int(r.removeprefix("policy"))] for r in reasons]
        if matched:
            verdict = max(matched, key=RANK.__getitem__)
        else:
            verdict = engine.default_verdict(ctx["skill"]["effect"], ctx["run"]["tainted"])[0]
        if verdict == "allow" and ctx["run"]["tainted"] and ctx["skill"]["effect"] in engine.TAINT_FLOOR_EFFECTS:
            return "confirm"
        return "confirm" if verdict == "allow" and ctx["skill"]["effect"] == "destructive" else verdict

    for ctx in contexts[:200]:  # warm both
        engine.evaluate(context=ctx, policies=[policy])
        cedar_decide(ctx)
    cel_samples, cedar_samples, unindexed_samples, agree, same_decision = [], [], [], 0, 0
    verdict_counts: dict[str, int] = {}
    for ctx in contexts:
        start = time.perf_counter_ns()
        decision = engine.evaluate(context=ctx, policies=[policy])
        cel_samples.append(_us(start))
        start = time.perf_counter_ns()
        every_rule = engine.evaluate(context=ctx, policies=[policy], indexed=False)
        unindexed_samples.append(_us(start))
        start = time.perf_counter_ns()  # Cedar last: each indexed decision follows a Cedar one, as before
        cedar_verdict = cedar_decide(ctx)
        cedar_samples.append(_us(start))
        agree += decision.verdict == cedar_verdict
        same_decision += decision == every_rule
        verdict_counts[decision.verdict] = verdict_counts.get(decision.verdict, 0) + 1
    reference = "cedarpy 4.12 (pre-parsed PolicySet), same 50 rules, same decisions"
    mix = ", ".join(f"{k} {v}" for k, v in sorted(verdict_counts.items()))
    return [
        Figure(
            f"policy eval p50, {RULES} CEL rules",
            percentile(cel_samples, 50),
            "µs",
            percentile(cedar_samples, 50),
            reference,
        ),
        Figure(
            f"policy eval p99, {RULES} CEL rules",
            percentile(cel_samples, 99),
            "µs",
            percentile(cedar_samples, 99),
            reference,
        ),
        Figure(f"CEL/Cedar verdict agreement ({DECISIONS} decisions: {mix})", 100 * agree / len(contexts), "%"),
        Figure(
            f"policy eval p50, {RULES} CEL rules, every rule run (index off)",
            percentile(unindexed_samples, 50),
            "µs",
            percentile(cedar_samples, 50),
            reference,
        ),
        Figure("indexed/every-rule Decision agreement (all fields)", 100 * same_decision / len(contexts), "%"),
    ]


# Live ASGI server ------------------------------------------------------------------------------------


def _server_env(workdir: Path) -> dict:
    database_url = os.environ.get("AIRLOCK_BENCH_DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    return server_env(workdir, REDIS_URL=None, SESSION_COOKIE_SECURE=None, LOG_LEVEL=None, DATABASE_URL=database_url)


def seed() -> dict:
    """Run inside the seeding subprocess: migrate, then a tenant, an agent, 10 read skills, a grant
    and the 50-rule policy, published. Prints the agent key as JSON."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from console.models import Team, Tenant
    from console.services import create_agent
    from policies import services as policy_services
    from policies.models import Grant, Scope
    from tests.runs.factories import make_skill

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    team = Team.objects.create(slug="bench-team", name="Bench team")
    for i in range(BATCH_SIZE):
        make_skill(
            f"bench.read_{i}",
            adapter="python:demo.get_order",
            team=team,
            publish=False,
            schema={
                "type": "object",
                "properties": {"order_id": {"type": "string", "pattern": "^ord_"}},
                "required": ["order_id"],
                "additionalProperties": False,
            },
        )
    Grant.objects.create(tenant=tenant, skill_pattern="bench.*", agent_role="support")
    policy = policy_services.create_policy(
        name="bench 50 rules", scope=Scope.TENANT, tenant=tenant, created_by=None, rules=cel_rules()
    )
    policy_services.publish_policy_version(version=policy_services.draft_of(policy), user=None)
    _, key = create_agent(tenant=tenant, name="bench-bot", role="support")
    return {"key": key}


def _timed_posts(client, url: str, bodies: list[dict]) -> tuple[list[float], float]:
    samples = []
    started = time.perf_counter()
    for body in bodies:
        start = time.perf_counter()
        response = client.post(url, json=body)
        samples.append((time.perf_counter() - start) * 1000)
        results = response.json()["results"]
        if response.status_code != 200 or any(r["status"] != "ok" for r in results):
            raise RuntimeError(f"gate answered {response.status_code}: {str(results)[:300]}")
    return samples, time.perf_counter() - started


def _concurrent_throughput(base: str, headers: dict, url: str, prefix: str) -> float:
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    per_client = SINGLE_CALLS // CONCURRENT_CLIENTS

    def worker(n: int) -> int:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            for i in range(per_client):
                body = {
                    "calls": [
                        {"call_id": f"{prefix}{n}-{i}", "name": "bench.read_0", "arguments": {"order_id": "ord_5001"}}
                    ]
                }
                assert client.post(url, json=body).status_code == 200
        return per_client

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENT_CLIENTS) as pool:
        done = sum(pool.map(worker, range(CONCURRENT_CLIENTS)))
    return done / (time.perf_counter() - started)


def bench_live_gate() -> list[Figure]:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)

    with tempfile.TemporaryDirectory(prefix="airlock-bench-gate-") as tmp:
        workdir = Path(tmp)
        env = _server_env(workdir)
        seeded = subprocess.run(
            [sys.executable, "-m", "bench.gate", "--seed"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        key = json.loads(seeded.stdout.strip().splitlines()[-1])["key"]
        headers = {"Authorization": f"Bearer {key}"}
        # The production process model with one web worker (bench.common.production_model).
        with (
            production_model(env, workdir, workers=1) as served,
            httpx.Client(base_url=served.base, headers=headers, timeout=30) as client,
        ):
            base = served.base
            run = client.post("/api/v1/runs", json={"end_user": "u-1", "task": "bench"}).json()
            url = f"/api/v1/runs/{run['run_id']}/calls"
            single = [
                {
                    "calls": [
                        {
                            "call_id": f"s{i}",
                            "name": f"bench.read_{i % BATCH_SIZE}",
                            "arguments": {"order_id": "ord_5001"},
                        }
                    ]
                }
                for i in range(SINGLE_CALLS)
            ]
            batch = [
                {
                    "calls": [
                        {"call_id": f"b{i}-{j}", "name": f"bench.read_{j}", "arguments": {"order_id": "ord_5001"}}
                        for j in range(BATCH_SIZE)
                    ]
                }
                for i in range(BATCHES)
            ]
            _timed_posts(
                client,
                url,
                [
                    {"calls": [{"call_id": f"w{i}", "name": "bench.read_0", "arguments": {"order_id": "ord_5001"}}]}
                    for i in range(30)
                ],
            )
            single_ms, single_s = _timed_posts(client, url, single)
            batch_ms, batch_s = _timed_posts(client, url, batch)
            concurrent_rps = _concurrent_throughput(base, headers, url, "c")
    database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
    note = f"Granian WSGI, 1 worker, behind the front door, DEBUG off, {database}, 50-rule policy per call"
    return [
        Figure("API single read call p50", percentile(single_ms, 50), "ms", reference_name=note),
        Figure("API single read call p99", percentile(single_ms, 99), "ms"),
        Figure("API single read calls, 1 client", SINGLE_CALLS / single_s, "calls/s"),
        Figure(f"API single read calls, {CONCURRENT_CLIENTS} clients", concurrent_rps, "calls/s"),
        Figure(f"API {BATCH_SIZE}-call read batch p50", percentile(batch_ms, 50), "ms"),
        Figure(f"API {BATCH_SIZE}-call read batch p99", percentile(batch_ms, 99), "ms"),
        Figure(f"API {BATCH_SIZE}-call read batches, 1 client", BATCHES * BATCH_SIZE / batch_s, "calls/s"),
    ]


def run() -> list[Figure]:
    return bench_policy_engines() + bench_live_gate()


if __name__ == "__main__":
    if "--seed" in sys.argv:
        print(json.dumps(seed()))
    else:
        from bench.common import setup_django

        setup_django()
        print_table(run(), "Policy gate")
