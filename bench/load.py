"""Load: many concurrent agents through a live deployment, a scripted approver, then the books.

The deployment is real: the production process model (Granian WSGI with two workers, the uvicorn stream
process and the nginx front door: bench.common.production_model), a Celery worker, PostgreSQL and Redis.
Each simulated agent loops: start a run, send a batch (two reads and, in turn, a write that
is allowed or a refund that needs approval), follow the run's events by long poll until every
approved call has its outcome, read the run. A scripted approver listens on /ws/approvals/ with a
session cookie (two sockets, two people, so decisions race) and decides through the approver API
with a personal access token; it declines one request in five, and re-reads the pending list every
second because a websocket message is a hint, not the only copy. "Approval decision → agent has the
result" runs from the moment the winning decision request is sent to the moment the agent's long
poll returns that call's `call.completed` (approver and agents share this process and its clock).

The skills call a small ledger service in a process of its own over `http:`; it counts every side effect
by (run, call), which is how "executed exactly once" is checked across processes.

Then the books, from the database (any discrepancy fails the run):
- every call has exactly one outcome (a final status and a stored result), and none failed (the
  ledger always answers, so a failure is Airlock's or the setup's, e.g. egress refusing the ledger);
- every approval request was decided or expired exactly once (audit log), none left pending;
- every approved call executed exactly once (the ledger) and no declined call executed at all;
- every run is final, or paused with a reason, or running with nothing outstanding;
- no span is missing (each call has its tool_call span, each approval its requested/decided spans).

Before the fleet, after a short unrecorded warm-up (WARMUP_AGENTS for WARMUP_SECONDS, so that no process
serves its first request while timed), one agent runs alone for LOAD_BASELINE_SECONDS (`--baseline`,
default 20 s; 0 skips both) with the same approvers. Its `POST /runs/{id}/calls` and "decision → agent has
the result" are what the fleet's are held to: each fleet p50 within 3 × the one agent's, each fleet p99
within 3 × its own p50, reported PASS or FAIL (only the books fail the run). One agent never waits behind
another, so its model time changes only how many episodes fit in the phase: it waits at most
BASELINE_MODEL_SECONDS a turn, which lets 20 s hold a handful of approval decisions.

Run: `make load` (200 agents × 60 s) or `.venv/bin/python -m bench.load --agents 20 --seconds 10`.
Environment: `AIRLOCK_LOAD_DATABASE_URL` (a database this script DROPS and recreates; default
postgres://postgres@127.0.0.1:5432/airlock_load), `AIRLOCK_LOAD_REDIS_URL` (else REDIS_URL, else
redis://127.0.0.1:6379/0; the db is flushed), `LOAD_AGENTS`, `LOAD_SECONDS`, `LOAD_THINK_SECONDS`,
`LOAD_BASELINE_SECONDS`.

The agents' model time (`--think` or LOAD_THINK_SECONDS, seconds a turn, default 0): a real agent waits
for its model before it sends a batch and again before it reads the run. At 0 the loop is closed, every
request sent the moment the previous one answered, which saturates any server: that measures capacity,
and a request's latency is then the agents in flight divided by the throughput (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import Figure, fresh_database, percentile, print_table, production_model, server_env

ROOT = Path(__file__).resolve().parent.parent
APPROVERS = 2
DECLINE_EVERY = 5
DECISIONS_IN_FLIGHT = 4  # per approver
SETTLE_SECONDS = 90
AGENT_KEYS = 50  # agent rows; simulated agents share them round-robin
POOL_SIZE = 12  # PostgreSQL connections per web worker (two) and per Celery process: bounded, not per request
BASELINE_MODEL_SECONDS = 1.0  # the one agent's model time a turn, at most (module docstring)
# Before the one agent, unrecorded: enough closed-loop episodes that every web worker and Celery process has
# served a batch, a decision and a resume (a process's first resume took 250-430 ms here, a warm one ~100)
WARMUP_AGENTS, WARMUP_SECONDS = 8, 3.0
WITHIN = 3.0  # the fleet's p50 against the one agent's, and its p99 against its own p50 (issue 35)
# the two paths held to WITHIN: the endpoint of Stats.latencies, or None for decision_to_result_ms
HELD_PATHS = {"POST /runs/{id}/calls": "POST /runs/{id}/calls", "decision → agent has the result": None}


def _database_url() -> str:
    return os.environ.get("AIRLOCK_LOAD_DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/airlock_load"


def _redis_url() -> str:
    return os.environ.get("AIRLOCK_LOAD_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def drop_database() -> None:
    fresh_database(_database_url(), create=False)


# --- the ledger: the skills' downstream service, counting side effects by (run, call) ---------


class _LedgerServer(ThreadingHTTPServer):
    # Python's listen backlog is 5: with 200 agents' calls arriving together the kernel's accept queue
    # overflowed and a call now and then met a reset connection, which the books rightly count as failed.
    request_queue_size = 1024
    daemon_threads = True


def serve_ledger() -> None:
    """`bench.load --ledger`: count side effects until killed; print the port first, answer GET /effects."""
    effects: Counter = Counter()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/effect"):
                with lock:
                    effects[(self.headers.get("X-Airlock-Run"), self.headers.get("X-Airlock-Call"))] += 1
            self._answer(b'{"ok": true}')

        def do_GET(self):  # noqa: N802
            with lock:
                counted = [[run, call, count] for (run, call), count in effects.items()]
            self._answer(json.dumps(counted).encode())

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = _LedgerServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Ledger:
    """The ledger in a process of its own: in the load generator's process it shared one GIL with 200
    agents' event loop, and every skill call waited for that loop's turns (p99 lag 244 ms)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.load", "--ledger"], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def effects(self) -> str:
        """Every (run, call, count) so far, as JSON."""
        with urllib.request.urlopen(f"{self.url}/effects", timeout=60) as answer:
            return answer.read().decode()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(20)


# --- seeding, in a subprocess on the load database ------------------------------------------


def seed(ledger_url: str, agents: int) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from console.models import Membership, Role, Team, Tenant
    from console.services import create_agent, create_personal_token
    from registry.snapshots import publish_snapshot
    from tests.runs.factories import grant, make_skill

    tenant = Tenant.objects.create(slug="load", name="Load")
    team = Team.objects.create(slug="load-team", name="Load team")
    amount = {
        "type": "object",
        "properties": {"amount_cents": {"type": "integer", "minimum": 1}, "note": {"type": "string"}},
        "required": ["amount_cents"],
        "additionalProperties": False,
    }
    make_skill("load.lookup", effect="read", team=team, publish=False, adapter=f"{ledger_url}/lookup")
    make_skill("load.note", effect="write", team=team, publish=False, adapter=f"{ledger_url}/effect", schema=amount)
    make_skill(
        "load.refund",
        effect="external",
        approval="required",
        team=team,
        publish=False,
        adapter=f"{ledger_url}/effect",
        schema=amount,
    )
    grant(tenant, "load.*")
    publish_snapshot(reason="load test")
    approvers = []
    for i in range(APPROVERS):
        user = get_user_model().objects.create_user(f"load-approver{i}", email=f"a{i}@example.com")
        Membership.objects.create(tenant=tenant, user=user, role=Role.APPROVER)
        client = Client()
        client.force_login(user)
        approvers.append(
            {
                "cookie": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "pat": create_personal_token(user=user, name="load")[1],
            }
        )
    keys = [
        create_agent(tenant=tenant, name=f"load-bot-{i}", role="support")[1] for i in range(min(agents, AGENT_KEYS))
    ]
    return {"keys": keys, "approvers": approvers, "cookie_name": settings.SESSION_COOKIE_NAME}


# --- the agents ------------------------------------------------------------------------------


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    batch_latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # POST /calls by kind
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    runs: int = 0
    calls: int = 0
    waited: int = 0
    late: int = 0  # outcomes the agent stopped waiting for after 60 s
    decisions: Counter = field(default_factory=Counter)
    # approval id -> perf_counter when the winning (200) decision request was sent / when the agent's
    # long poll returned that call's outcome; matched after the run into "decision → agent has the result"
    decision_sent: dict[int, float] = field(default_factory=dict)
    result_seen: dict[int, float] = field(default_factory=dict)
    loop_lag: list[float] = field(default_factory=list)  # ms, see watch_loop_lag

    def decision_to_result_ms(self) -> list[float]:
        return [
            (self.result_seen[approval] - sent) * 1000
            for approval, sent in self.decision_sent.items()
            if approval in self.result_seen
        ]

    def samples(self, path: str) -> list[float]:
        """Latencies (ms) of one of HELD_PATHS."""
        endpoint = HELD_PATHS[path]
        return self.latencies[endpoint] if endpoint else self.decision_to_result_ms()

    async def request(self, http, endpoint: str, method: str, url: str, *, batch_kind: str = "", **kwargs):
        """The response; its latency is recorded under `endpoint`, and under `batch_kind` too when given."""
        started = time.perf_counter()
        response = await http.request(method, url, **kwargs)
        elapsed_ms = (time.perf_counter() - started) * 1000
        self.latencies[endpoint].append(elapsed_ms)
        if batch_kind:
            self.batch_latencies[batch_kind].append(elapsed_ms)
        self.statuses[(endpoint, response.status_code)] += 1
        if response.status_code >= 500:
            self.errors.append(f"{endpoint} {response.status_code}: {response.text[:200]}")
        return response


@dataclass
class Recording:
    """Where the approvers, shared by both phases, record: the phase under way (the one agent, then the fleet)."""

    stats: Stats


async def agent_loop(
    index: int, http, key: str, stats: Stats, stop: asyncio.Event, think_s: float = 0.0, *, fleet: bool = True
) -> None:
    """One agent's episodes, until `stop`. With `think_s`, the agent's model takes that long on average
    (half to one and a half times, fixed per agent, in a `fleet`; exactly, alone) before it sends its batch
    and again after it has the results, and in a fleet its first episode starts somewhere in one such cycle;
    0 is a closed loop, each request sent the moment the previous one answered."""
    headers = {"Authorization": f"Bearer {key}"}
    episode = 0
    chance = random.Random(index)
    model_time = think_s * chance.uniform(0.5, 1.5) if fleet else think_s
    if fleet:  # agents of a fleet do not all start at one instant: each joins somewhere in its first cycle
        await asyncio.sleep(chance.uniform(0, 2 * model_time))
    while not stop.is_set():
        episode += 1
        response = await stats.request(
            http,
            "POST /runs",
            "POST",
            "/api/v1/runs",
            headers=headers,
            json={"end_user": f"user-{index}", "task": "load"},
        )
        if response.status_code != 201:
            continue
        run_id = response.json()["run_id"]
        stats.runs += 1
        await asyncio.sleep(model_time)  # the model decides what to call
        third = (
            {
                "call_id": "c3",
                "name": "load.refund",
                "arguments": {"amount_cents": 100 + episode},
                "idempotency_key": f"{run_id}:refund",
            }
            if episode % 2
            else {"call_id": "c3", "name": "load.note", "arguments": {"amount_cents": 1, "note": "n"}}
        )
        calls = [
            {"call_id": "c1", "name": "load.lookup", "arguments": {"q": "a"}},
            {"call_id": "c2", "name": "load.lookup", "arguments": {"q": "b"}},
            third,
        ]
        response = await stats.request(
            http,
            "POST /runs/{id}/calls",
            "POST",
            f"/api/v1/runs/{run_id}/calls",
            headers=headers,
            json={"calls": calls},
            batch_kind="with an approval" if episode % 2 else "with a write",
        )
        if response.status_code != 200:
            continue
        stats.calls += len(calls)
        waiting = {r["call_id"] for r in response.json()["results"] if r["status"] == "approval_required"}
        cursor = 0
        deadline = time.monotonic() + 60
        while waiting and time.monotonic() < deadline:
            response = await stats.request(
                http,
                "GET /runs/{id}/events (long poll)",
                "GET",
                f"/api/v1/runs/{run_id}/events",
                headers=headers,
                params={"after": cursor, "wait": 20},
            )
            if response.status_code != 200:
                await asyncio.sleep(0.5)
                continue
            arrived = time.perf_counter()
            body = response.json()
            cursor = body["next_cursor"]
            for event in body["events"]:
                if event["kind"] == "call.completed":
                    waiting.discard(event["payload"]["call_id"])
                    stats.result_seen.setdefault(event["payload"]["approval_id"], arrived)
        if waiting:  # slow, not lost: the books check that every decided call got its call.completed event
            stats.late += len(waiting)
        else:
            stats.waited += 1 if episode % 2 else 0
        await asyncio.sleep(model_time)  # the model reads the results
        await stats.request(http, "GET /runs/{id}", "GET", f"/api/v1/runs/{run_id}", headers=headers)


# --- the scripted approver -------------------------------------------------------------------


async def approver_loop(base: str, seeded: dict, who: int, recording: Recording, stop: asyncio.Event) -> None:
    """Listens on the websocket, decides by the approver API; re-reads pending every second."""
    import httpx
    from websockets.asyncio.client import connect

    person = seeded["approvers"][who]
    hints: asyncio.Queue[int] = asyncio.Queue()
    seen: set[int] = set()
    headers = {"Authorization": f"Bearer {person['pat']}"}

    async def listen() -> None:
        while not stop.is_set():
            try:
                async with connect(
                    base.replace("http://", "ws://") + "/ws/approvals/",
                    origin=base,
                    additional_headers={"Cookie": f"{seeded['cookie_name']}={person['cookie']}"},
                ) as ws:
                    async for message in ws:
                        data = json.loads(message)
                        if data.get("status") == "pending":
                            recording.stats.decisions["websocket hints"] += 1
                            hints.put_nowait(data["approval_id"])
            except Exception:  # noqa: BLE001 - reconnect; the pending re-read covers the gap
                await asyncio.sleep(0.5)

    async def reread() -> None:
        while not stop.is_set():
            await asyncio.sleep(1)
            response = await http.get("/api/v1/approvals", params={"status": "pending"}, headers=headers)
            if response.status_code == 200:
                for approval in response.json()["results"]:
                    hints.put_nowait(approval["id"])

    in_flight = asyncio.Semaphore(DECISIONS_IN_FLIGHT)

    async def decide(approval_id: int) -> None:
        decision = "decline" if approval_id % DECLINE_EVERY == 0 else "approve"
        stats = recording.stats  # the phase the approval was raised in: its agent is still waiting for it
        async with in_flight:
            sent = time.perf_counter()
            response = await stats.request(
                http,
                "POST /approvals/{id}/decision",
                "POST",
                f"/api/v1/approvals/{approval_id}/decision",
                headers=headers,
                json={"decision": decision, "reason": "load"},
            )
        stats.decisions[f"{decision} → {response.status_code}"] += 1
        if response.status_code == 200:  # the decision that won; the other approver's gets 409
            stats.decision_sent[approval_id] = sent
        if response.status_code >= 500:
            seen.discard(approval_id)  # the pending re-read offers it again

    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        tasks = [asyncio.create_task(listen()), asyncio.create_task(reread())]
        try:
            while not stop.is_set():
                try:
                    approval_id = await asyncio.wait_for(hints.get(), 0.5)
                except TimeoutError:
                    continue
                if approval_id in seen:
                    continue
                seen.add(approval_id)
                tasks.append(asyncio.create_task(decide(approval_id)))
        finally:
            for task in tasks:
                task.cancel()


async def watch_loop_lag(stats: Stats, stop: asyncio.Event, every: float = 0.05) -> None:
    """How late this process's event loop wakes a sleeper: if the load generator were the bottleneck,
    its own timestamps (and every latency above) would carry this lag."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(every)
        stats.loop_lag.append((time.perf_counter() - started - every) * 1000)


async def run_agents(
    http, keys: list[str], agents: int, stats: Stats, seconds: float, think_s: float, *, fleet: bool
) -> float:
    """`agents` agents' episodes for `seconds`, then until each has finished its episode (SETTLE_SECONDS at
    most); the seconds that took."""
    stop = asyncio.Event()
    started = time.perf_counter()
    tasks = [
        asyncio.create_task(agent_loop(i, http, keys[i % len(keys)], stats, stop, think_s, fleet=fleet))
        for i in range(agents)
    ]
    await asyncio.sleep(seconds)
    stop.set()
    _, unfinished = await asyncio.wait(tasks, timeout=SETTLE_SECONDS)
    for task in unfinished:
        task.cancel()
    return time.perf_counter() - started


@dataclass
class Drive:
    alone: Stats  # the one agent's phase
    alone_elapsed: float
    stats: Stats  # the fleet's phase
    elapsed: float


async def drive(
    base: str,
    seeded: dict,
    agents: int,
    seconds: float,
    think_s: float = 0.0,
    *,
    baseline_s: float = 0.0,
    fleet_starts=lambda: None,
) -> Drive:
    """One agent alone for `baseline_s`, then `agents` for `seconds`; `fleet_starts()` is called between."""
    import httpx

    alone, stats = Stats(), Stats()
    recording = Recording(alone)
    stop_approvers = asyncio.Event()
    limits = httpx.Limits(max_connections=agents + 20, max_keepalive_connections=agents + 20)
    approvers = [
        asyncio.create_task(approver_loop(base, seeded, i, recording, stop_approvers))
        for i in range(len(seeded["approvers"]))
    ]
    await asyncio.sleep(1)  # sockets connected before the first request
    async with httpx.AsyncClient(base_url=base, timeout=90, limits=limits) as http:
        alone_elapsed = 0.0
        if baseline_s > 0:
            warm = recording.stats = Stats()  # the warm-up: its runs are in the books, its figures nowhere
            await run_agents(http, seeded["keys"], WARMUP_AGENTS, warm, WARMUP_SECONDS, 0.0, fleet=True)
            alone.errors.extend(warm.errors)  # but a 5xx in it counts as much as any other
            recording.stats = alone
            alone_think = min(think_s, BASELINE_MODEL_SECONDS)
            alone_elapsed = await run_agents(http, seeded["keys"], 1, alone, baseline_s, alone_think, fleet=False)
        recording.stats = stats
        fleet_starts()
        lag_watch = asyncio.create_task(watch_loop_lag(stats, stop_approvers))
        elapsed = await run_agents(http, seeded["keys"], agents, stats, seconds, think_s, fleet=True)
    stop_approvers.set()
    await asyncio.wait([*approvers, lag_watch], timeout=5)
    return Drive(alone=alone, alone_elapsed=alone_elapsed, stats=stats, elapsed=elapsed)


# --- the books ------------------------------------------------------------------------------


def check_books(effects: Counter) -> dict:
    """In a subprocess on the load database: every discrepancy, by kind (empty lists = balanced)."""
    import django

    django.setup()
    from django.db.models import Count, Q

    from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus
    from runs import lifecycle
    from runs.models import CallStatus, Run, RunEvent, RunStatus, ToolCall
    from traces.models import Span

    problems: dict[str, list[str]] = defaultdict(list)
    final_calls = {
        CallStatus.DENIED,
        CallStatus.INVALID,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        "declined",
        "expired",
        "timeout_unknown",
        "reconciled",
        "cancelled",
    }
    calls = list(
        ToolCall.objects.select_related("run").annotate(tool_spans=Count("spans", filter=Q(spans__kind="tool_call")))
    )
    for call in calls:
        label = f"{call.run_id}/{call.call_id}"
        if call.status not in final_calls or call.result is None:
            problems["call without exactly one outcome"].append(f"{label} is {call.status}")
        if call.tool_spans < 1:
            problems["span missing"].append(f"{label}: no tool_call span")
        if call.status == CallStatus.FAILED:  # the ledger always answers: a failure is the setup's or Airlock's
            problems["call failed (the ledger never fails)"].append(f"{label}: {call.error_class} {call.result}")
    by_call = {(str(c.run_id), c.call_id): c for c in calls}
    approvals = list(ApprovalRequest.objects.select_related("call"))
    closing = Counter(
        ApprovalEvent.objects.filter(from_status=ApprovalStatus.PENDING)
        .exclude(to_status="")
        .values_list("request_id", flat=True)
    )
    executed_events = Counter(
        ApprovalEvent.objects.filter(to_status=ApprovalStatus.EXECUTED).values_list("request_id", flat=True)
    )
    completed = Counter(RunEvent.objects.filter(kind="call.completed").values_list("run_id", "payload__call_id"))
    span_names = defaultdict(set)
    for call_id, name in Span.objects.filter(kind__startswith="approval").values_list("call_id", "name"):
        span_names[call_id].add(name)
    for approval in approvals:
        label = f"approval {approval.pk}"
        if approval.status == ApprovalStatus.PENDING:
            problems["approval never decided"].append(label)
            continue
        if closing[approval.pk] != 1:
            problems["approval not decided exactly once (audit log)"].append(f"{label}: {closing[approval.pk]}")
        key = (str(approval.call.run_id), approval.call.call_id)
        if completed[(approval.call.run_id, approval.call.call_id)] != 1:
            problems["outcome not delivered exactly once (call.completed)"].append(
                f"{label}: {completed[(approval.call.run_id, approval.call.call_id)]}"
            )
        if approval.status in (ApprovalStatus.EXECUTED, ApprovalStatus.APPROVED, ApprovalStatus.EXECUTING):
            if approval.status != ApprovalStatus.EXECUTED or executed_events[approval.pk] != 1:
                problems["approved action not executed exactly once"].append(f"{label}: {approval.status}")
            if effects[key] != 1:
                problems["approved action not executed exactly once"].append(f"{label}: {effects[key]} side effects")
        elif effects[key]:
            problems["declined or expired action executed"].append(f"{label}: {effects[key]} side effects")
        names = span_names[approval.call_id]
        if "approval.requested" not in names or not any(n != "approval.requested" for n in names):
            problems["span missing"].append(f"{label}: approval spans {sorted(names)}")
    for (run_id, call_id), count in effects.items():
        call = by_call.get((run_id, call_id))
        if call is None or count != 1:
            problems["side effect not matched to one call"].append(f"{run_id}/{call_id}: {count}")
    for run in Run.objects.prefetch_related("calls"):
        outstanding = [c for c in run.calls.all() if c.status not in final_calls]
        if run.status in lifecycle.RUN_CLOSED:
            continue
        if run.status == RunStatus.PAUSED and run.status_reason and outstanding:
            continue
        if run.status == RunStatus.RUNNING and not outstanding:
            continue
        problems["run neither final nor paused with a reason"].append(
            f"{run.pk}: {run.status} ({run.status_reason!r}), {len(outstanding)} outstanding"
        )
    return {
        "counts": {
            "runs": Run.objects.count(),
            "calls": len(calls),
            "approvals": len(approvals),
            "executed": sum(a.status == ApprovalStatus.EXECUTED for a in approvals),
            "declined": sum(a.status == ApprovalStatus.DECLINED for a in approvals),
            "side effects": sum(effects.values()),
            "spans": Span.objects.count(),
        },
        "problems": {k: v for k, v in problems.items()},
    }


# --- orchestration --------------------------------------------------------------------------


def _subprocess_json(args: list[str], env: dict, payload: str = "") -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.load", *args],
        env=env,
        cwd=ROOT,
        input=payload,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.load {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _wait_ready(check, process: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start in time")


def _tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy (not idle or waiting for I/O) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def cpu_use(processes: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far: this process (agents, approvers), each named process tree, the machine."""
    return {
        "load generator": time.process_time(),
        **{name: _tree_cpu_seconds(pid) for name, pid in processes.items()},
        "machine": _machine_busy_seconds(),
    }


def wal_flushes() -> int:
    """How many times PostgreSQL has flushed its WAL to disk (the whole server, since its statistics reset):
    each commit that wrote waits for one, and a disk does only so many a second (`pg_test_fsync`)."""
    import psycopg

    with psycopg.connect(_database_url()) as connection:
        return connection.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()[0]


@dataclass
class Held:
    """One of HELD_PATHS: the one agent's figures, the fleet's, and whether the fleet's stay WITHIN."""

    path: str
    alone_p50: float
    alone_p99: float
    p50: float
    p99: float

    @property
    def slowdown(self) -> float:  # the fleet's p50 against the one agent's
        return self.p50 / self.alone_p50 if self.alone_p50 else float("nan")

    @property
    def spread(self) -> float:  # the fleet's p99 against its own p50
        return self.p99 / self.p50 if self.p50 else float("nan")


def verdict(ratio: float) -> str:
    return "PASS" if ratio <= WITHIN else "FAIL"  # nan (no samples) fails


@dataclass
class LoadResult:
    figures: list[Figure]
    stats: Stats
    books: dict
    elapsed: float
    cpu: dict[str, float] = field(default_factory=dict)  # % of one core over the drive, by process
    wal_flushes_per_s: float = 0.0  # the whole PostgreSQL server's, over the drive
    alone: Stats = field(default_factory=Stats)  # the one agent's phase, before the fleet
    alone_elapsed: float = 0.0

    @property
    def balanced(self) -> bool:
        return not self.books["problems"] and not self.stats.errors and not self.alone.errors

    def held(self) -> list[Held]:
        rows = []
        for path in HELD_PATHS:
            alone, fleet = self.alone.samples(path), self.stats.samples(path)
            rows.append(
                Held(path, percentile(alone, 50), percentile(alone, 99), percentile(fleet, 50), percentile(fleet, 99))
            )
        return rows


def baseline_default() -> float:
    return float(os.environ.get("LOAD_BASELINE_SECONDS", 20))


def load(agents: int, seconds: float, log=print, think_s: float = 0.0, baseline_s: float | None = None) -> LoadResult:
    import redis

    redis.Redis.from_url(_redis_url()).flushdb()
    fresh_database(_database_url())
    workdir = Path(tempfile.mkdtemp(prefix="airlock-load-"))
    ledger = Ledger()
    env = server_env(
        workdir,
        DATABASE_URL=f"{_database_url()}?pool_max_size={POOL_SIZE}",
        REDIS_URL=_redis_url(),
        AIRLOCK_CHANNEL_PREFIX=f"load{os.getpid()}",
        # the skills' service is this process on loopback: let the gate and the worker reach it, and only it
        AIRLOCK_EGRESS_ALLOW_HOSTS="127.0.0.1",
        AIRLOCK_EGRESS_PORTS=str(ledger.port),
    )
    seeded = _subprocess_json(["--seed", ledger.url, str(agents)], env)
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
            "-n",
            f"load{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
        ],
        env=env,
        cwd=ROOT,
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        with production_model(env, workdir) as served:  # web (Granian, 2 workers), stream, the front door
            base = served.base
            _wait_ready(lambda: "ready" in worker_log.read_text(), worker, "the Celery worker")
            baseline_s = baseline_default() if baseline_s is None else baseline_s
            log(
                f"[load] one agent alone for {baseline_s:g} s, then {agents} agents for {seconds:g} s, model time "
                f"{think_s:g} s a turn, against {base} (logs in {workdir})"
            )
            processes = {**served.pids, "celery": worker.pid, "ledger": ledger.process.pid}
            cpu_before: dict[str, float] = {}
            wal_before: list[int] = []
            driven = asyncio.run(
                drive(
                    base,
                    seeded,
                    agents,
                    seconds,
                    think_s,
                    baseline_s=baseline_s,
                    fleet_starts=lambda: (cpu_before.update(cpu_use(processes)), wal_before.append(wal_flushes())),
                )
            )
            stats, elapsed = driven.stats, driven.elapsed
            cpu = {name: 100 * (used - cpu_before[name]) / elapsed for name, used in cpu_use(processes).items()}
            flushes_per_s = (wal_flushes() - wal_before[0]) / elapsed
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        effects = ledger.effects()
        ledger.stop()
    books = _subprocess_json(["--books"], env, payload=effects)
    total = sum(len(v) for v in stats.latencies.values())
    figures = [
        Figure(f"{agents} agents × {seconds:g} s: requests", total / elapsed, "req/s"),
        Figure(f"{agents} agents × {seconds:g} s: tool calls", stats.calls / elapsed, "calls/s"),
    ]
    for endpoint, samples in sorted(stats.latencies.items()):
        for label, pct in (("p50", 50), ("p95", 95), ("p99", 99)):
            figures.append(Figure(f"{endpoint} {label}", percentile(samples, pct), "ms"))
    for kind, samples in sorted(stats.batch_latencies.items()):
        for label, pct in (("p50", 50), ("p99", 99)):
            figures.append(Figure(f"  of which batches {kind} {label}", percentile(samples, pct), "ms"))
    for label, pct in (("p50", 50), ("p95", 95), ("p99", 99)):
        figures.append(
            Figure(
                f"approval decision → agent has the result {label}",
                percentile(stats.decision_to_result_ms(), pct),
                "ms",
            )
        )
    figures.append(Figure("load generator's own CPU (1 core = 100)", cpu["load generator"], "%"))
    result = LoadResult(
        figures=figures,
        stats=stats,
        books=books,
        elapsed=elapsed,
        cpu=cpu,
        wal_flushes_per_s=flushes_per_s,
        alone=driven.alone,
        alone_elapsed=driven.alone_elapsed,
    )
    for held in result.held():
        figures.append(Figure(f"one agent alone: {held.path} p50", held.alone_p50, "ms"))
        figures.append(
            Figure(
                f"{held.path} p50, against one agent",
                held.p50,
                "ms",
                reference=held.alone_p50,
                reference_name=f"the same, one agent alone at the start of the run (passes at ratio ≤ {WITHIN:g})",
            )
        )
        figures.append(
            Figure(
                f"{held.path} p99, against its p50",
                held.p99,
                "ms",
                reference=held.p50,
                reference_name=f"its p50 under the same load (passes at ratio ≤ {WITHIN:g})",
            )
        )
    return result


def report(result: LoadResult) -> None:
    stats = result.stats
    print(
        f"\n{stats.runs} runs, {stats.calls} tool calls, {sum(len(v) for v in stats.latencies.values())} "
        f"requests in {result.elapsed:.1f} s"
    )
    print("responses: " + ", ".join(f"{e} {s}: {n}" for (e, s), n in sorted(stats.statuses.items())))
    print(f"outcomes later than 60 s (the agent stopped waiting; the books still require them): {stats.late}")
    print("approver: " + ", ".join(f"{k}: {v}" for k, v in sorted(stats.decisions.items())))
    print(
        f"decision → agent has the result: {len(stats.decision_to_result_ms())} of {len(stats.decision_sent)} "
        "decisions matched to the long poll that returned their outcome"
    )
    print(
        "CPU, % of one core over the drive (2 cores = 200): "
        + ", ".join(f"{name} {share:.0f}" for name, share in result.cpu.items())
        + f"; load generator's event loop wakes late by p50 {percentile(stats.loop_lag, 50):.1f} ms, "
        f"p99 {percentile(stats.loop_lag, 99):.1f} ms"
    )
    print(f"PostgreSQL WAL flushes to disk (the whole server): {result.wal_flushes_per_s:.0f}/s over the drive")
    print_held(result)
    print("books: " + ", ".join(f"{k} {v}" for k, v in result.books["counts"].items()))
    for kind, items in result.books["problems"].items():
        print(f"DISCREPANCY {kind}: {len(items)} (e.g. {items[:3]})")
    for error in [*result.alone.errors, *stats.errors][:10]:
        print(f"ERROR {error}")
    print("BOOKS BALANCE" if result.balanced else "BOOKS DO NOT BALANCE")


def print_held(result: LoadResult) -> None:
    """The one agent against the fleet, per HELD_PATHS; a FAIL is reported, it does not fail the run."""
    alone = result.alone
    print(
        f"\none agent alone first: {alone.runs} runs, {len(alone.samples('POST /runs/{id}/calls'))} batches, "
        f"{len(alone.decision_to_result_ms())} decisions matched to their result in {result.alone_elapsed:.1f} s"
    )
    print(
        f"{'ms':<42} {'alone p50':>9} {'alone p99':>9} {'p50':>8} {'p99':>8}   "
        f"{'p50 / alone p50':<17} {'p99 / p50':<17}"
    )
    for held in result.held():
        print(
            f"{held.path:<42} {held.alone_p50:9.0f} {held.alone_p99:9.0f} {held.p50:8.0f} {held.p99:8.0f}   "
            f"{held.slowdown:5.2f} {verdict(held.slowdown):<11} {held.spread:5.2f} {verdict(held.spread)}"
        )
    print(f"(each ratio ≤ {WITHIN:g}: PASS; a FAIL is reported, only the books fail the run)")


def _think_default() -> float:
    return float(os.environ.get("LOAD_THINK_SECONDS", 0))


def run() -> list[Figure]:
    """For `make bench`: the full load (LOAD_AGENTS, LOAD_SECONDS; default 200 × 60 s)."""
    result = load(
        int(os.environ.get("LOAD_AGENTS", 200)),
        float(os.environ.get("LOAD_SECONDS", 60)),
        log=lambda line: print(line, file=sys.stderr),
        think_s=_think_default(),
        baseline_s=baseline_default(),
    )
    report(result)
    if not result.balanced:
        raise RuntimeError("the books do not balance (see DISCREPANCY lines)")
    return result.figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=int(os.environ.get("LOAD_AGENTS", 200)))
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("LOAD_SECONDS", 60)))
    parser.add_argument(
        "--think", type=float, default=_think_default(), help="the agents' model time a turn, seconds (0: closed loop)"
    )
    parser.add_argument(
        "--baseline",
        type=float,
        default=baseline_default(),
        help="seconds one agent runs alone first, the figures the fleet's are held to (0: none)",
    )
    args = parser.parse_args()
    result = load(args.agents, args.seconds, think_s=args.think, baseline_s=args.baseline)
    print_table(
        result.figures, f"Load: {args.agents} agents for {args.seconds:g} s, model time {args.think:g} s a turn"
    )
    report(result)
    return 0 if result.balanced else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ledger"]:
        serve_ledger()
    elif sys.argv[1:2] == ["--seed"]:
        print(json.dumps(seed(sys.argv[2], int(sys.argv[3]))))
    elif sys.argv[1:2] == ["--books"]:
        rows = json.loads(sys.stdin.read())
        print(json.dumps(check_books(Counter({(run, call): count for run, call, count in rows}))))
    else:
        sys.exit(main())
