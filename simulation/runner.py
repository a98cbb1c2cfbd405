"""Drives the scenarios: a gentle stream for the demo, or a burst of concurrent agents for benchmarks."""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from airlock_sdk import Airlock, AirlockError, ApprovalRequired, ApprovalTimeout, Run, tool_skill

from simulation.scenarios import SCENARIOS, Context, Stats, describe, register_client_skills
from simulation.setup import SimAgent

# The gentle stream's order: the first four runs cover every path a newcomer should see.
GENTLE_ORDER = [
    "support",
    "injection",
    "docs",
    "failures",
    "support",
    "docs",
    "support",
    "failures",
    "injection",
    "docs",
]


def wait_for_server(base_url: str, timeout: float, log: Callable[[str], None]) -> bool:
    deadline = time.monotonic() + timeout
    announced = False
    while time.monotonic() < deadline:
        try:
            # The agent API being up is what matters (healthz may report a missing Celery worker, for example).
            if httpx.get(f"{base_url.rstrip('/')}/api/v1/snapshots/public-key", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if not announced:
            log(f"Waiting for Airlock at {base_url} ...")
            announced = True
        time.sleep(0.5)
    return False


@dataclass
class Options:
    base_url: str
    agents: int = 1
    rate: float = 0.15  # episodes per second, all agents together
    duration: float = 0  # seconds; 0 runs until interrupted
    burst: bool = False
    max_pending: int = 6
    seed: int | None = None
    cache_dir: str | None = None
    public_key_pem: str | None = None  # the server's own key: the simulator pins it instead of trusting first use


class Simulator:
    def __init__(self, options: Options, keys: dict[str, SimAgent], log: Callable[[str], None]) -> None:
        self.options = options
        self.keys = keys
        self.log = log
        self.stats = Stats()
        self.rng = random.Random(options.seed)
        self.pending = 0
        self.pending_lock = threading.Lock()
        self.waiters = ThreadPoolExecutor(max_workers=max(options.max_pending, 1), thread_name_prefix="sim-wait")
        self.stop = threading.Event()
        self.clients: dict[str, Airlock] = {}
        self.skills: dict[str, dict[str, str]] = {}
        self.can_finish = [True]
        for scenario, agent in keys.items():
            client = Airlock(
                options.base_url,
                agent.key,
                cache_dir=options.cache_dir,
                retries=3,
                public_key_pem=options.public_key_pem,
            )
            register_client_skills(client)
            self.clients[scenario] = client

    def discover(self) -> None:
        """Map short names to the agents' real skill names (the demo catalog's namespaces may change)."""
        for scenario, client in self.clients.items():
            try:
                names = [tool_skill(tool) for tool in client.tools(format="openai")]
            except AirlockError as exc:
                self.log(f"[{scenario}] discovery failed: {exc}")
                names = []
            self.skills[scenario] = {name.rsplit(".", 1)[-1]: name for name in names}
            self.log(f"[{self.keys[scenario].name}] may use {len(names)} skills")

    def on_approval(self, run: Run, approval: ApprovalRequired, what: str, then=None) -> None:
        if self.options.burst:
            return  # the load generator never blocks on people
        with self.pending_lock:
            self.pending += 1
        self.log(f"  approval #{approval.approval_id} waiting in the inbox: {what} ({approval.reason or 'confirm'})")
        self.waiters.submit(self._wait, run, approval, what, then)

    def _wait(self, run: Run, approval: ApprovalRequired, what: str, then) -> None:
        result = None
        try:
            while result is None and not self.stop.is_set():
                try:
                    result = run.wait(approval.approval_id, timeout=10)
                except ApprovalTimeout:
                    continue
                except AirlockError as exc:
                    self.log(f"  approval #{approval.approval_id}: {exc}")
                    time.sleep(5)
        finally:
            with self.pending_lock:
                self.pending -= 1
        if result is None:
            return
        self.log(
            f"  approval #{approval.approval_id} ({what}) decided: {describe(result)}; run {run.run_id[:8]} continues"
        )
        if then is not None:
            try:
                then(result)
            except AirlockError as exc:
                self.log(f"  run {run.run_id[:8]} stopped: {exc}")

    def context(self, scenario: str) -> Context:
        agent_key, function = SCENARIOS[scenario]
        return Context(
            airlock=self.clients[agent_key],
            agent=self.keys[agent_key].name,
            rng=self.rng,
            stats=self.stats,
            log=self.log,
            on_approval=self.on_approval,
            skills=self.skills.get(agent_key, {}),
            can_finish=self.can_finish,
        )

    def episode(self, scenario: str) -> None:
        function = SCENARIOS[scenario][1]
        ctx = self.context(scenario)
        if scenario in ("support", "injection") and not self.options.burst:
            with self.pending_lock:
                crowded = self.pending >= self.options.max_pending
            if crowded:  # enough requests are waiting for people; keep the stream moving with reads
                function, ctx = SCENARIOS["docs"][1], self.context("docs")
        try:
            function(ctx)
            with self.stats.lock:
                self.stats.runs += 1
        except AirlockError as exc:
            self.log(f"[{ctx.agent}] {scenario} stopped: {exc}")
        except httpx.HTTPError as exc:
            self.log(f"[{ctx.agent}] {scenario} transport failure: {exc}")

    def run(self) -> Stats:
        self.discover()
        deadline = time.monotonic() + self.options.duration if self.options.duration else None
        order = itertools.cycle(GENTLE_ORDER if not self.options.burst else list(SCENARIOS))
        interval = 1 / self.options.rate if self.options.rate > 0 else 0
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(self.options.agents, 1), thread_name_prefix="sim-agent") as pool:
            futures: list = []
            submitted = 0
            while not self.stop.is_set() and not (deadline and time.monotonic() >= deadline):
                futures = [f for f in futures if not f.done()]
                if len(futures) >= self.options.agents:
                    self.stop.wait(0.01)
                    continue
                futures.append(pool.submit(self.episode, next(order)))
                submitted += 1
                if interval:
                    self.stop.wait(max(0.0, started + submitted * interval - time.monotonic()))
        self.stop.set()
        self.waiters.shutdown(wait=False, cancel_futures=True)
        return self.stats


def report(stats: Stats, elapsed: float) -> list[str]:
    lines = [
        f"{stats.runs} runs, {sum(stats.outcomes.values())} calls in {elapsed:.1f} s "
        f"({sum(stats.outcomes.values()) / max(elapsed, 1e-9):.1f} calls/s)"
    ]
    if stats.latencies:
        ordered = sorted(stats.latencies)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        lines.append(
            f"batch latency p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms"
        )
    lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in stats.outcomes.most_common()))
    return lines
