"""Local decisions benchmark: an allowed client-side read decided by the SDK from its signed bundle, side by
side with calling the same function directly and with the same call through the live gate.

1. The direct call of the client skill's function (µs, p50): the floor.
2. The same call through `run.call` with `local_first=True` (µs, p50): argument validation, grants, the
   50-rule policy of the gate bench, the agent's rate limit, and the spool's durable decision and result
   writes (SQLite, WAL, synchronous=NORMAL). Its overhead over (1) is the figure the issue bounds (≤ 200 µs).
3. The same call through the live gate (ms, p50): Granian WSGI with one worker behind the front door, the
   batch POST and the client result POST (the gate's `execute_locally` round trip).
4. The spool's two writes alone under synchronous=NORMAL and FULL (µs, p50).

Run alone: `.venv/bin/python -m bench.local_decisions`; `make bench` runs it with the others.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import Figure, percentile, print_table, production_model
from bench.gate import _server_env, cel_rules

ROOT = Path(__file__).resolve().parent.parent
LOCAL_CALLS = 2000
GATE_CALLS = 60
SPOOL_WRITES = 1000
SKILL = "bench.read_local"
SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^ord_"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def seed() -> dict:
    """Inside the seeding subprocess: a tenant whose support role decides locally, one client-executed read
    skill granted to it, and the gate bench's 50-rule policy, published. Prints the agent key as JSON."""
    import django

    django.setup()
    from datetime import timedelta

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from console.models import Team, Tenant
    from console.services import create_agent
    from policies import services as policy_services
    from policies.models import Grant, Scope
    from registry.snapshots import publish_snapshot
    from tests.runs.factories import make_skill

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    team = Team.objects.create(slug="bench-team", name="Bench team")
    make_skill(SKILL, adapter=f"client:{SKILL}", team=team, publish=False, schema=SCHEMA)
    Grant.objects.create(tenant=tenant, skill_pattern="bench.*", agent_role="support")
    policy = policy_services.create_policy(
        name="bench 50 rules", scope=Scope.TENANT, tenant=tenant, created_by=None, rules=cel_rules()
    )
    policy_services.publish_policy_version(version=policy_services.draft_of(policy), user=None)
    policy_services.set_local_decisions(
        tenant=tenant, agent_roles=["support"], bundle_validity=timedelta(minutes=10), by_label="bench"
    )
    publish_snapshot(reason="local decisions bench")
    _, key = create_agent(tenant=tenant, name="bench-bot", role="support")
    return {"key": key}


def read_order(order_id: str) -> dict:
    return {"order_id": order_id, "status": "shipped"}


def _timed(function, count: int) -> list[float]:
    samples = []
    for n in range(count):
        start = time.perf_counter()
        function(n)
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def bench_spool(directory: Path) -> dict[str, float]:
    from airlock_sdk.spool import Spool

    figures = {}
    for mode in ("NORMAL", "FULL"):
        spool = Spool(directory / f"spool-{mode}.sqlite", synchronous=mode)

        def write(n: int, spool=spool, mode=mode) -> None:
            now = datetime.now(UTC)
            call_id = f"{mode}-{n}"
            spool.record_decision(
                call_id=call_id,
                run_id="r",
                skill=SKILL,
                version="1.0.0",
                arguments={"order_id": "ord_1"},
                verdict="allow",
                reason="reads are allowed by default",
                bundle_number=1,
                decided_at=now,
            )
            spool.record_result(call_id, status="succeeded", result={"ok": True}, finished_at=now)

        figures[mode] = percentile(_timed(write, SPOOL_WRITES), 50)
        spool.close()
    return figures


def bench_local_and_gate() -> list[Figure]:
    import logging

    from airlock_sdk import Airlock, ClientSkillRegistry, Ok

    logging.getLogger("httpx").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="airlock-bench-local-") as tmp:
        workdir = Path(tmp)
        env = _server_env(workdir)
        seeded = subprocess.run(
            [sys.executable, "-m", "bench.local_decisions", "--seed"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        key = json.loads(seeded.stdout.strip().splitlines()[-1])["key"]
        skills = ClientSkillRegistry()
        skills.register(SKILL, read_order)
        with production_model(env, workdir, workers=1) as served:
            airlock = Airlock(
                served.base, key, cache_dir=workdir / "sdk-cache", trust_dir=workdir / "sdk-trust", client_skills=skills
            )
            run = airlock.start_run(end_user="u-1", task="bench")
            airlock.refresh_bundle()

            def through_gate(n: int) -> None:
                (result,) = run.call([{"call_id": f"g{n}", "name": SKILL, "arguments": {"order_id": "ord_5001"}}])
                assert isinstance(result, Ok) and not result.decided_locally, result

            def locally(n: int) -> None:
                (result,) = run.call([{"call_id": f"l{n}", "name": SKILL, "arguments": {"order_id": "ord_5001"}}])
                assert isinstance(result, Ok) and result.decided_locally, result

            _timed(through_gate, 5)  # warm the worker
            gate_us = _timed(through_gate, GATE_CALLS)
            airlock.local_first = True
            _timed(locally, 200)
            local_us = _timed(locally, LOCAL_CALLS)
            direct_us = _timed(lambda n: read_order(order_id="ord_5001"), LOCAL_CALLS)
            airlock.close()
        spool = bench_spool(workdir)
    direct, local, gate = (percentile(samples, 50) for samples in (direct_us, local_us, gate_us))
    overhead = local - direct
    return [
        Figure("client read, direct function call p50", direct, "µs"),
        Figure(
            "client read, decided locally p50 (overhead over direct)",
            overhead,
            "µs",
            reference=200.0,
            reference_name="target: at most 200 µs over the direct call (validation, 50-rule policy, spool)",
        ),
        Figure("client read, decided locally p99", percentile(local_us, 99) - direct, "µs"),
        Figure(
            "client read, through the live gate p50",
            gate / 1000,
            "ms",
            reference=local / 1000,
            reference_name="the local decision's p50 in the same run (ratio: times faster locally; target ≥ 10)",
        ),
        Figure("spool decision + result, synchronous=NORMAL p50", spool["NORMAL"], "µs"),
        Figure(
            "spool decision + result, synchronous=FULL p50",
            spool["FULL"],
            "µs",
            reference=spool["NORMAL"],
            reference_name="synchronous=NORMAL under WAL (survives a crash of the agent's process)",
        ),
    ]


def run() -> list[Figure]:
    return bench_local_and_gate()


if __name__ == "__main__":
    if "--seed" in sys.argv:
        print(json.dumps(seed()))
    else:
        from bench.common import setup_django

        setup_django()
        print_table(run(), "Local decisions")
