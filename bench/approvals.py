"""Approvals benchmark, in one run with Redis (channels_redis), a Celery worker and PostgreSQL.

1. Fan-out: from the agent's API call that creates an approval request (POST /runs/{id}/calls with
   a confirm verdict) to the `approval.changed` notification arriving on 1, 10 and 100 connected
   approver websockets (ms, p50/p95/max over every socket of every sample). Then, side by side, the
   fan-out alone: from the hint being sent (`approvals.broadcast`'s message, sent by this process to the
   tenant's group in Redis, as the web worker sends it after its commit) to its arrival on every socket.
2. Decision to agent: from an approver's API decision (POST /approvals/{id}/decision) to the agent
   receiving the executed result (`call.completed`) by long poll, and by signed webhook (ms, p50/p95).

Live processes: the production process model (Granian WSGI with one worker, the uvicorn stream process,
the nginx front door; DEBUG off) and a Celery worker (prefork, 4), all on a
fresh PostgreSQL database (`AIRLOCK_BENCH_DATABASE_URL`, default airlock_bench_approvals on
127.0.0.1) and Redis (`AIRLOCK_BENCH_REDIS_URL`, else REDIS_URL, else redis://127.0.0.1:6379/0).

Run alone: `.venv/bin/python -m bench.approvals`; `make bench` runs it with the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import Figure, percentile, print_table, production_model, server_env

ROOT = Path(__file__).resolve().parent.parent
SOCKET_COUNTS = (1, 10, 100)
FANOUT_SAMPLES = 20
DECISION_SAMPLES = 20
DATABASE_NAME = "airlock_bench_approvals"
_API_RESPONSE_MS: list[float] = []  # the creating API call's own response time, for context

try:  # the worker imports this module (-I bench.approvals) to get the downstream tool
    from runs.adapters.python import register

    @register("bench.approvals_refund", effect="external", approval="required")
    def bench_refund(*, arguments, context):
        return {"refund_id": f"rf_{context.call_id}", "amount_cents": arguments.get("amount_cents")}
except Exception:  # noqa: BLE001 - imported outside Django (the bench runner itself)
    pass


def _redis_url() -> str:
    return os.environ.get("AIRLOCK_BENCH_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def _database_url() -> str:
    return os.environ.get("AIRLOCK_BENCH_DATABASE_URL") or f"postgres://postgres@127.0.0.1:5432/{DATABASE_NAME}"


def _fresh_database() -> None:
    if os.environ.get("AIRLOCK_BENCH_DATABASE_URL"):
        return
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {DATABASE_NAME} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {DATABASE_NAME}")


def seed() -> dict:
    """In the seeding subprocess: migrate, then a tenant, 100 approvers with sessions, one with a
    personal token, an agent, and a refund skill that needs approval, published."""
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from console.models import Membership, Role, Team, Tenant
    from console.services import create_agent, create_personal_token
    from registry.snapshots import publish_snapshot
    from tests.runs.factories import grant, make_skill

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    team = Team.objects.create(slug="bench-team", name="Bench team")
    make_skill(
        "bench.create_refund",
        effect="external",
        approval="required",
        team=team,
        publish=False,
        adapter="python:bench.approvals_refund",
        schema={
            "type": "object",
            "properties": {"amount_cents": {"type": "integer"}},
            "required": ["amount_cents"],
            "additionalProperties": False,
        },
    )
    grant(tenant, "bench.*")
    publish_snapshot(reason="bench approvals")
    from django.contrib.auth import get_user_model

    cookies = []
    users = []
    for i in range(max(SOCKET_COUNTS)):
        user = get_user_model().objects.create_user(f"approver{i}", email=f"approver{i}@example.com")
        Membership.objects.create(tenant=tenant, user=user, role=Role.APPROVER)
        client = Client()
        client.force_login(user)
        cookies.append(client.cookies[settings.SESSION_COOKIE_NAME].value)
        users.append(user)
    _, pat = create_personal_token(user=users[0], name="bench")
    _, key = create_agent(tenant=tenant, name="bench-bot", role="support")
    return {
        "key": key,
        "pat": pat,
        "cookies": cookies,
        "cookie_name": settings.SESSION_COOKIE_NAME,
        "tenant_id": tenant.pk,
    }


class _Receiver:
    """Webhook receiver: records when each call.completed arrives."""

    def __init__(self) -> None:
        self.completed: dict[int, float] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.perf_counter()
                event = json.loads(body)
                if event["kind"] == "call.completed":
                    receiver.completed.setdefault(event["payload"]["approval_id"], arrived)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


async def _listen(ws, arrivals: dict) -> None:
    """Records when each `pending` hint about a request arrives: the first from its creation, the second the
    one the bench sends itself (`_hint`)."""
    from websockets.exceptions import ConnectionClosed

    try:
        async for message in ws:
            data = json.loads(message)
            if data.get("status") == "pending":
                arrivals.setdefault(data["approval_id"], []).append(time.perf_counter())
    except ConnectionClosed:
        return


def _channel_layer():
    """The server's channel layer, as console.settings configures it (channels_redis, the same prefix)."""
    from channels_redis.core import RedisChannelLayer

    return RedisChannelLayer(hosts=[{"address": _redis_url()}], prefix=os.environ["AIRLOCK_CHANNEL_PREFIX"])


async def _hint(layer, tenant_id: int, approval_id: int) -> float:
    """Send the request's `approval.changed` hint again, exactly as approvals.broadcast.send_now does."""
    from dataclasses import asdict

    from approvals.broadcast import ApprovalChanged, tenant_group

    message = asdict(ApprovalChanged(approval_id=approval_id, tenant="bench", status="pending"))
    started = time.perf_counter()
    await layer.group_send(tenant_group(tenant_id), message)
    return started


async def _arrived(arrivals: list[dict], approval_id: int, count: int, times: int) -> None:
    deadline = time.perf_counter() + 10
    while any(len(seen.get(approval_id, ())) < times for seen in arrivals) and time.perf_counter() < deadline:
        await asyncio.sleep(0.002)
    missing = sum(len(seen.get(approval_id, ())) < times for seen in arrivals)
    if missing:
        raise RuntimeError(f"{missing} of {count} sockets never got hint {times} about request {approval_id}")


async def _propose(http, key: str, callback_url: str = "") -> tuple[str, int, float]:
    headers = {"Authorization": f"Bearer {key}"}
    run = (
        await http.post(
            "/api/v1/runs",
            json={
                "end_user": "bench-user",
                "task": "bench",
                **({"callback_url": callback_url} if callback_url else {}),
            },
            headers=headers,
        )
    ).json()
    started = time.perf_counter()
    response = await http.post(
        f"/api/v1/runs/{run['run_id']}/calls",
        headers=headers,
        json={"calls": [{"call_id": "c1", "name": "bench.create_refund", "arguments": {"amount_cents": 100}}]},
    )
    _API_RESPONSE_MS.append((time.perf_counter() - started) * 1000)
    result = response.json()["results"][0]
    if result["status"] != "approval_required":
        raise RuntimeError(f"expected a confirm verdict, got {result}")
    return run["run_id"], result["approval_id"], started


async def _fanout(base: str, seeded: dict, count: int) -> tuple[list[float], list[float]]:
    """(creation → socket, hint sent → socket) latencies in ms, over every socket of every sample."""
    import httpx
    from websockets.asyncio.client import connect

    ws_url = base.replace("http://", "ws://") + "/ws/approvals/"
    sockets, listeners, arrivals = [], [], []
    for cookie in seeded["cookies"][:count]:
        ws = await connect(ws_url, origin=base, additional_headers={"Cookie": f"{seeded['cookie_name']}={cookie}"})
        sockets.append(ws)
        arrivals.append({})
        listeners.append(asyncio.create_task(_listen(ws, arrivals[-1])))
    latencies: list[float] = []
    hinted: list[float] = []
    layer = _channel_layer()
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for _ in range(FANOUT_SAMPLES):
            _, approval_id, started = await _propose(http, seeded["key"])
            await _arrived(arrivals, approval_id, count, 1)
            latencies.extend((seen[approval_id][0] - started) * 1000 for seen in arrivals)
            await asyncio.sleep(0.05)  # the creation's own work (its Celery tasks) out of the way
            sent = await _hint(layer, seeded["tenant_id"], approval_id)
            await _arrived(arrivals, approval_id, count, 2)
            hinted.extend((seen[approval_id][1] - sent) * 1000 for seen in arrivals)
    await layer.close_pools()
    for task in listeners:
        task.cancel()
    for ws in sockets:
        await ws.close()
    return latencies, hinted


async def _long_poll(http, key: str, run_id: str, after: int) -> float:
    headers = {"Authorization": f"Bearer {key}"}
    while True:
        body = (
            await http.get(f"/api/v1/runs/{run_id}/events", params={"after": after, "wait": 30}, headers=headers)
        ).json()
        for event in body["events"]:
            if event["kind"] == "call.completed":
                if event["payload"]["result"]["status"] != "ok":
                    raise RuntimeError(f"not executed: {event}")
                return time.perf_counter()
        after = body["next_cursor"]


async def _decisions(base: str, seeded: dict, receiver: _Receiver) -> tuple[list[float], list[float]]:
    import httpx

    by_poll, by_webhook = [], []
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for _ in range(DECISION_SAMPLES):
            run_id, approval_id, _ = await _propose(http, seeded["key"], receiver.url)
            cursor = (
                await http.get(f"/api/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {seeded['key']}"})
            ).json()["next_cursor"]
            poll = asyncio.create_task(_long_poll(http, seeded["key"], run_id, cursor))
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            response = await http.post(
                f"/api/v1/approvals/{approval_id}/decision",
                json={"decision": "approve"},
                headers={"Authorization": f"Bearer {seeded['pat']}"},
            )
            if response.status_code != 200:
                raise RuntimeError(f"decision failed: {response.status_code} {response.text[:300]}")
            by_poll.append((await asyncio.wait_for(poll, 30) - started) * 1000)
            deadline = time.perf_counter() + 30
            while approval_id not in receiver.completed and time.perf_counter() < deadline:
                await asyncio.sleep(0.002)
            by_webhook.append((receiver.completed[approval_id] - started) * 1000)
    return by_poll, by_webhook


def _wait_ready(check, process: subprocess.Popen, what: str, timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start in time")


def run() -> list[Figure]:

    try:
        import redis

        redis.Redis.from_url(_redis_url()).ping()
        _fresh_database()
    except Exception as exc:  # noqa: BLE001
        print(f"[bench] approvals needs Redis and PostgreSQL: {exc}", file=sys.stderr)
        return []
    workdir = Path(tempfile.mkdtemp(prefix="airlock-bench-approvals-"))
    receiver = _Receiver()
    env = server_env(
        workdir,
        DATABASE_URL=_database_url(),
        REDIS_URL=_redis_url(),
        AIRLOCK_ALLOW_PRIVATE_CALLBACKS="1",
        # the webhook receiver is this process on loopback: let the worker reach it, and only it
        AIRLOCK_EGRESS_PORTS=str(receiver.server.server_address[1]),
        AIRLOCK_CHANNEL_PREFIX=f"benchappr{os.getpid()}",
    )
    seeded = json.loads(
        subprocess.run(
            [sys.executable, "-m", "bench.approvals", "--seed"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()[-1]
    )
    worker_log = workdir / "worker.log"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "worker",
            "--concurrency=4",
            "-I",
            "bench.approvals",
            "-n",
            f"bench{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
        ],
        env=env,
        cwd=ROOT,
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    figures: list[Figure] = []
    try:
        with production_model(env, workdir, workers=1) as served:  # Granian, uvicorn stream, the front door
            base = served.base
            _wait_ready(lambda: "ready" in worker_log.read_text(), worker, "the Celery worker")
            os.environ["AIRLOCK_CHANNEL_PREFIX"] = env["AIRLOCK_CHANNEL_PREFIX"]
            for count in SOCKET_COUNTS:
                created, hinted = asyncio.run(_fanout(base, seeded, count))
                for what, samples in (("create", created), ("hint sent", hinted)):
                    for label, pct in (("p50", 50), ("p95", 95)):
                        figures.append(
                            Figure(f"fan-out {what}→{count} websockets {label}", percentile(samples, pct), "ms")
                        )
                    figures.append(Figure(f"fan-out {what}→{count} websockets max", max(samples), "ms"))
            figures.append(
                Figure("creating API call's own response p50 (context)", percentile(_API_RESPONSE_MS, 50), "ms")
            )
            by_poll, by_webhook = asyncio.run(_decisions(base, seeded, receiver))
            for name, samples in (("long poll", by_poll), ("webhook", by_webhook)):
                for label, pct in (("p50", 50), ("p95", 95)):
                    figures.append(
                        Figure(f"decision→executed result by {name} {label}", percentile(samples, pct), "ms")
                    )
    finally:
        receiver.server.shutdown()
        worker.terminate()
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
    return figures


if __name__ == "__main__":
    if "--seed" in sys.argv:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.gate_settings")
        print(json.dumps(seed()))
    else:
        print_table(run(), "Approvals (Redis channel layer, Celery worker, PostgreSQL)")
