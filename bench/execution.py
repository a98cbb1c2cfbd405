"""Execution-plane benchmark: what governance costs per call.

One read skill on a local HTTP tool (a threaded server on loopback answering a small JSON body).
The same tool is called N times directly (`httpx.post`, exactly what the http adapter sends) and N
times through the gate (`runs.gate.process_batch`: resolve in the pinned snapshot, validate,
authorize, policy, breaker, attempt, contract check, result hygiene, call row, span), interleaved
so both see the same machine state. Figures: p50/p99 of each and their ratio, and the added
milliseconds at p50.

Runs in a child process on its own SQLite database with the benchmark settings (rate limits out of
the way). Run alone: `.venv/bin/python -m bench.execution`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import Figure, free_port, percentile, print_table

ROOT = Path(__file__).resolve().parent.parent
CALLS = 400
WARMUP = 40
BODY = json.dumps({"order_id": "ord_1234", "status": "paid", "total_cents": 4200, "currency": "EUR"}).encode()


class _Tool(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def _world(url: str):
    from console.models import Team, Tenant
    from console.services import create_agent
    from policies.models import Grant
    from registry.models import Skill, SkillVersion
    from registry.snapshots import latest_snapshot, publish_snapshot
    from runs.models import Run

    team = Team.objects.create(slug="bench", name="Bench")
    tenant = Tenant.objects.create(slug="bench", name="Bench")
    agent, _ = create_agent(tenant=tenant, name="bench", role="support")
    manifest = {
        "skill_id": "skl_orders_get",
        "name": "orders.get_order",
        "version": "1.0.0",
        "description": "Read one order by id.",
        "input_schema": {
            "type": "object",
            "required": ["order_id"],
            "additionalProperties": False,
            "properties": {"order_id": {"type": "string", "pattern": "^ord_[A-Za-z0-9]{4,24}$"}},
        },
        "output_schema": {
            "type": "object",
            "required": ["order_id", "status"],
            "properties": {
                "order_id": {"type": "string"},
                "status": {"type": "string"},
                "total_cents": {"type": "integer"},
                "currency": {"type": "string"},
            },
        },
        "risk": {"effect": "read", "data_classification": "internal", "approval": "not_required"},
        "permissions": {"allowed_agent_roles": ["*"], "allowed_tenants": ["*"], "oauth_scopes": []},
        "execution": {
            "adapter": url,
            "timeout_ms": 5000,
            "max_attempts": 2,
            "result_limit_bytes": 16384,
            "idempotent": True,
        },
        "ownership": {"team": "bench"},
    }
    skill = Skill.objects.create(
        skill_id="skl_orders_get", name="orders.get_order", namespace="orders", owner_team=team
    )
    SkillVersion.objects.create(
        skill=skill, version="1.0.0", major=1, status="active", manifest=manifest, effect="read"
    )
    Grant.objects.create(tenant=tenant, skill_pattern="orders.*", agent_role="support")
    publish_snapshot(reason="bench")
    return Run.objects.create(tenant=tenant, agent=agent, end_user="u-1", snapshot=latest_snapshot())


def child() -> None:
    import django
    import httpx

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["BENCH_TOOL_PORT"])), _Tool)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/orders/get"
    run = _world(url)

    from runs.gate import process_batch

    arguments = {"order_id": "ord_1234"}
    direct, gated = [], []
    for i in range(WARMUP + CALLS):
        start = time.perf_counter()
        response = httpx.post(url, json=arguments, headers={"X-Airlock-Run": "bench"}, timeout=5)
        response.json()
        elapsed_direct = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        result = process_batch(
            run=run, calls=[{"call_id": f"c{i}", "name": "orders.get_order", "arguments": arguments}]
        )[0]
        elapsed_gate = (time.perf_counter() - start) * 1000
        assert result["status"] == "ok", result
        if i >= WARMUP:
            direct.append(elapsed_direct)
            gated.append(elapsed_gate)
    server.shutdown()
    print(json.dumps({"direct": direct, "gated": gated}))


def run() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        from bench.gate import _server_env  # DEBUG off, signing key, own SQLite database in tmp

        port = free_port()
        env = {
            **_server_env(Path(tmp)),
            "DATABASE_URL": f"sqlite:///{tmp}/bench_execution.sqlite3",
            # the tool is the child's own HTTP server on loopback: let the gate reach it, and only it
            "BENCH_TOOL_PORT": str(port),
            "AIRLOCK_EGRESS_ALLOW_HOSTS": "127.0.0.1",
            "AIRLOCK_EGRESS_PORTS": str(port),
        }
        out = subprocess.run(
            [sys.executable, "-m", "bench.execution", "--child"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    samples = json.loads(out.stdout.strip().splitlines()[-1])
    direct, gated = samples["direct"], samples["gated"]
    reference = f"the same HTTP tool called directly with httpx.post ({CALLS} calls, loopback)"
    return [
        Figure("read through the gate p50 (ms)", percentile(gated, 50), "ms", percentile(direct, 50), reference),
        Figure("read through the gate p99 (ms)", percentile(gated, 99), "ms", percentile(direct, 99), reference),
        Figure("gate overhead per read at p50", percentile(gated, 50) - percentile(direct, 50), "ms"),
    ]


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        print_table(run(), "execution plane: gate overhead over calling the tool directly")
