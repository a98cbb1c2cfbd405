"""Throughput on the production process model: the gate's single-read call, the project's bare endpoint and
the minimal Django app (the physical anchor), side by side in one run, by `wrk`.

The production model (airlock/serving.py: Granian WSGI, two workers, behind the nginx front door, with the
uvicorn stream process beside it; DEBUG off, PostgreSQL through the default psycopg pool, Redis, rate limits
out of the way: bench/throughput_settings.py) serves the project's endpoints in turn, and the minimal app
(bench/minimal_settings.py, no project middleware) runs under the same Granian WSGI command:
- minimal-bare: the minimal app's one ORM INSERT and a small JSON answer;
- bare: `POST /api/bench/bare`, one ORM INSERT and a small JSON answer (bench/throughput_urls.py);
- gate: `POST /api/v1/runs/{run_id}/calls` with one call of `customer.read_profile` (the demo
  catalog's manifest, python adapter, no network).
`wrk -t2 -c32 --latency` drives each for SECONDS after a WARMUP_SECONDS warm-up, in ROUNDS runs that
alternate them (so that a change in the machine's other load hits all alike); throughput is
over all rounds, p50 and p99 the median of the rounds' own. A Lua script cycles
the requests over 32 agents, each with its own key and open run, and gives every call a unique
call_id (prefix, thread, counter), so no request is an idempotent replay. After the runs the database
must hold exactly one succeeded call (one row, for bare) per answered request, and wrk must have seen
only 200s and no socket error; otherwise the script fails.

Then the gate's server time in process: the Django test Client against the same database and
settings (no HTTP, no ASGI), SERVER_TIME_CALLS sequential single calls after SERVER_TIME_WARMUP.

Run: `.venv/bin/python -m bench.throughput` (or `make bench`). Environment:
`AIRLOCK_THROUGHPUT_DATABASE_URL` (a database this script DROPS and recreates; default
postgres://postgres@127.0.0.1:5432/airlock_bench_throughput), `AIRLOCK_THROUGHPUT_REDIS_URL` (else
REDIS_URL, else redis://127.0.0.1:6379/0; not flushed). `wrk` is installed with apt-get when missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airlock.serving import stream_command, web_command
from bench.common import (
    BARE_PATH,
    Figure,
    free_port,
    fresh_database,
    percentile,
    print_table,
    production_model,
    server_env,
    started,
    wait_until_answers,
)

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 32
CONNECTIONS = 32
THREADS = 2
WORKERS = 2
WARMUP_SECONDS = 3
SECONDS = 15  # per endpoint, in ROUNDS interleaved wrk runs
ROUNDS = 3
SERVER_TIME_WARMUP = 50
SERVER_TIME_CALLS = 300
SKILL = "customer.read_profile"
ARGUMENTS = {"customer_id": "cus_ada100"}
MINIMAL_SETTINGS = "bench.minimal_settings"
SERVED = ("minimal-bare", "bare", "gate", "asgi-bare", "asgi-gate")

# Cycles the requests over the (path, key) pairs; each thread starts half-way round from the other so
# that the two do not hit the same agent at once. Call ids are prefix-thread-counter: never repeated.
LUA = """
local targets = %(targets)s
local prefix = "%(prefix)s"
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  bad = 0
  offset = id * math.floor(#targets / %(threads)d)
end

function request()
  local target = targets[(counter + offset) %% #targets + 1]
  counter = counter + 1
  local body = string.format(
    '{"calls":[{"call_id":"%%s-%%d-%%d","name":"%(skill)s","arguments":%(arguments)s}]}', prefix, id, counter)
  return wrk.format("POST", target[1], {
    ["Authorization"] = "Bearer " .. target[2],
    ["Content-Type"] = "application/json",
  }, body)
end

function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end

function done(summary, latency, requests)
  local non_200 = 0
  for _, thread in ipairs(threads) do non_200 = non_200 + thread:get("bad") end
  local e = summary.errors
  io.write(string.format(
    'AIRLOCK {"requests": %%d, "duration_us": %%d, "non_200": %%d, "socket_errors": %%d, '
      .. '"p50_us": %%d, "p99_us": %%d}\\n',
    summary.requests, summary.duration, non_200, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def _database_url() -> str:
    return (
        os.environ.get("AIRLOCK_THROUGHPUT_DATABASE_URL")
        or "postgres://postgres@127.0.0.1:5432/airlock_bench_throughput"
    )


def _redis_url() -> str:
    return os.environ.get("AIRLOCK_THROUGHPUT_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def drop_database(url: str) -> None:
    fresh_database(url, create=False)


def ensure_wrk() -> str:
    """The path of `wrk`, installing the Debian package when it is missing."""
    if shutil.which("wrk") is None:
        print("[throughput] installing wrk (apt-get)", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "wrk"]
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
            subprocess.run(install, env=env, capture_output=True)
    path = shutil.which("wrk")
    if path is None:
        raise RuntimeError("wrk is missing and could not be installed (apt-get install wrk)")
    return path


# --- in subprocesses on the throughput database ------------------------------------------------


def seed(agents: int = AGENTS) -> dict:
    """A tenant, the read skill published, a grant to its agents' role, `agents` agents with keys and one
    open run each; and the bare endpoint's table. Returns [(key, run_id)]."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from bench.models import BARE_TABLE_SQL
    from console.models import Team, Tenant
    from console.services import create_agent
    from policies.services import create_grant
    from registry.demo import CATALOG
    from registry.services import create_draft_version, publish_as_operator
    from runs.services import start_run

    with connection.cursor() as cursor:
        cursor.execute(BARE_TABLE_SQL)
    manifest = next(m for m in CATALOG if m["name"] == SKILL)
    Team.objects.get_or_create(slug=manifest["ownership"]["team"], defaults={"name": "Support tools"})
    draft = create_draft_version(manifest=manifest, author=None)
    publish_as_operator(version=draft, command="bench.throughput")
    tenant = Tenant.objects.create(slug="throughput", name="Throughput")
    role = manifest["permissions"]["allowed_agent_roles"][0]
    create_grant(
        tenant=tenant,
        skill_pattern=SKILL,
        agent_role=role,
        granted_by=None,
        oauth_scopes=manifest["permissions"]["oauth_scopes"],
    )
    pairs = []
    for i in range(agents):
        agent, key = create_agent(tenant=tenant, name=f"throughput-bot-{i}", role=role)
        run = start_run(agent=agent, end_user=f"user-{i}", task="throughput bench")
        pairs.append([key, str(run.pk)])
    return {"pairs": pairs}


def count_outcomes(prefixes: list[str]) -> dict:
    """Per call-id prefix: gate calls by status, and bare rows."""
    import django

    django.setup()
    from django.db.models import Count

    from bench.models import BareRow
    from runs.models import ToolCall

    counts: dict = {}
    for prefix in prefixes:
        calls = ToolCall.objects.filter(call_id__startswith=f"{prefix}-").values("status").annotate(n=Count("id"))
        counts[prefix] = {
            "calls": {row["status"]: row["n"] for row in calls},
            "bare rows": BareRow.objects.filter(call_id__startswith=f"{prefix}-").count(),
        }
    return counts


def server_time(key: str, run_id: str, warmup: int = SERVER_TIME_WARMUP, calls: int = SERVER_TIME_CALLS) -> dict:
    """Milliseconds per single-call request through Django's full handler and middleware, in process."""
    import django

    django.setup()
    from django.test import Client
    from django.urls import reverse

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {key}")
    url = reverse("runs_api:run_calls", args=[run_id])
    samples = []
    for i in range(warmup + calls):
        body = {"calls": [{"call_id": f"p-{i}", "name": SKILL, "arguments": ARGUMENTS}]}
        started = time.perf_counter()
        response = client.post(url, body, content_type="application/json")
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or response.json()["results"][0]["status"] != "ok":
            raise RuntimeError(f"in-process call answered {response.status_code}: {response.content[:300]!r}")
        if i >= warmup:
            samples.append(elapsed)
    return {"samples_ms": samples}


def _subprocess_json(args: list[str], env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.throughput", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.throughput {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- wrk -----------------------------------------------------------------------------------------


def lua_script(targets: list[tuple[str, str]], prefix: str) -> str:
    """The wrk script for (path, key) targets; every call id starts with `prefix-`."""
    table = "{" + ", ".join(f"{{{json.dumps(path)}, {json.dumps(key)}}}" for path, key in targets) + "}"
    return LUA % {
        "targets": table,
        "prefix": prefix,
        "threads": THREADS,
        "skill": SKILL,
        "arguments": json.dumps(ARGUMENTS, separators=(",", ":")),
    }


def run_wrk(wrk: str, base: str, targets: list[tuple[str, str]], prefix: str, seconds: float, workdir: Path) -> dict:
    """One wrk run; its summary as the Lua `done` reports it (requests, latencies in µs, errors)."""
    script = workdir / f"{prefix}.lua"
    script.write_text(lua_script(targets, prefix))
    # wrk takes whole seconds: a round of `--seconds 8` split three ways is 3 s, not "2.67s" (refused)
    done = subprocess.run(
        [wrk, f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "--latency"]
        + ["-s", str(script), base],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("AIRLOCK ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr[-1000:]} {done.stdout[-1000:]}")
    summary = json.loads(lines[-1].removeprefix("AIRLOCK "))
    summary["per_second"] = summary["requests"] / (summary["duration_us"] / 1e6)
    summary["output"] = done.stdout
    return summary


def describe(summary: dict) -> str:
    return (
        f"{summary['requests']} requests, {summary['per_second']:.1f}/s, p50 {summary['p50_us'] / 1000:.1f} ms, "
        f"p99 {summary['p99_us'] / 1000:.1f} ms, {summary['non_200']} non-200, {summary['socket_errors']} socket errors"
    )


def check_recorded(label: str, summary: dict, written: int, others: dict | None = None) -> None:
    """Every answered request wrote its row (requests still in flight when wrk stopped may add up to one
    per connection), wrk saw only 200s and no socket errors, and nothing else was recorded."""
    problems = []
    if summary["non_200"] or summary["socket_errors"]:
        problems.append(f"wrk saw {summary['non_200']} non-200 answers and {summary['socket_errors']} socket errors")
    if not summary["requests"] <= written <= summary["requests"] + CONNECTIONS:
        problems.append(f"{summary['requests']} answered requests but {written} recorded")
    if others:
        problems.append(f"calls not succeeded: {others}")
    if problems:
        raise RuntimeError(f"{label}: " + "; ".join(problems))


def prepare(workdir: Path, agents: int = AGENTS, database_url: str = "") -> tuple[dict, list[list[str]]]:
    """A fresh database seeded for the bench, and the servers' environment: (env, [[key, run_id]])."""
    database_url = database_url or _database_url()
    fresh_database(database_url)
    env = server_env(
        workdir,
        DJANGO_SETTINGS_MODULE="bench.throughput_settings",
        DATABASE_URL=database_url,  # no query: the deployment's default psycopg pool
        REDIS_URL=_redis_url(),
        AIRLOCK_CHANNEL_PREFIX=f"throughput{os.getpid()}",
    )
    return env, _subprocess_json(["--seed", str(agents)], env)["pairs"]


@contextmanager
def serving(env: dict, workdir: Path, workers: int = WORKERS) -> Iterator[str]:
    """The production process model (bench.common.production_model); yields the front door's base URL."""
    with production_model(env, workdir, workers=workers) as served:
        yield served.base


@contextmanager
def serving_asgi(env: dict, workdir: Path, workers: int = WORKERS) -> Iterator[str]:
    """The same code as served before the process model: every request through uvicorn and Django's ASGI
    handler, `workers` processes, no front door. For the before-and-after figures only."""
    port = free_port()
    command = [*stream_command("127.0.0.1", port), "--workers", str(workers), "--log-level", "warning"]
    with started({"asgi": [*command, "--no-access-log"]}, env, workdir) as processes:
        base = f"http://127.0.0.1:{port}"
        wait_until_answers(base + BARE_PATH, processes)  # 405 to a GET: up
        yield base


@contextmanager
def serving_minimal(env: dict, workdir: Path, workers: int = WORKERS) -> Iterator[str]:
    """The physical anchor: the minimal Django app (bench/minimal_settings.py) under the same Granian WSGI
    workers, reached directly."""
    port = free_port()
    command = web_command("127.0.0.1", port, workers=workers)
    command[-1:] = ["--factory", "django.core.wsgi:get_wsgi_application"]
    with started({"minimal": command}, {**env, "DJANGO_SETTINGS_MODULE": MINIMAL_SETTINGS}, workdir) as processes:
        base = f"http://127.0.0.1:{port}"
        wait_until_answers(base + BARE_PATH, processes)
        yield base


def gate_targets(pairs: list[list[str]]) -> list[tuple[str, str]]:
    return [(f"/api/v1/runs/{run_id}/calls", key) for key, run_id in pairs]


def bare_targets(pairs: list[list[str]]) -> list[tuple[str, str]]:
    return [(BARE_PATH, key) for key, _ in pairs]


def verify(runs: dict[str, dict], env: dict) -> None:
    """Each wrk run (by call-id prefix; bare ones end in "bare") against what the database recorded."""
    counts = _subprocess_json(["--count", *runs], env)
    for label, summary in runs.items():
        if label.endswith("bare"):
            check_recorded(label, summary, counts[label]["bare rows"])
        else:
            calls = dict(counts[label]["calls"])
            check_recorded(label, summary, calls.pop("succeeded", 0), calls)


def combined(rounds: list[dict]) -> dict:
    """Throughput over all rounds together; latency percentiles as the median of the rounds' own."""
    return {
        "per_second": sum(r["requests"] for r in rounds) / (sum(r["duration_us"] for r in rounds) / 1e6),
        "p50_us": statistics.median(r["p50_us"] for r in rounds),
        "p99_us": statistics.median(r["p99_us"] for r in rounds),
    }


def throughput(seconds: float = SECONDS, warmup_seconds: float = WARMUP_SECONDS, agents: int = AGENTS) -> list[Figure]:
    wrk = ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="airlock-bench-throughput-"))
    env, pairs = prepare(workdir, agents)
    bare, gate = bare_targets(pairs), gate_targets(pairs)
    runs = {}
    rounds: dict[str, list[dict]] = {label: [] for label in SERVED}
    with (
        serving_minimal(env, workdir) as minimal,
        serving(env, workdir) as production,
        serving_asgi(env, workdir) as asgi,
    ):
        plan = {
            "minimal-bare": (minimal, bare),
            "bare": (production, bare),
            "gate": (production, gate),
            "asgi-bare": (asgi, bare),
            "asgi-gate": (asgi, gate),
        }
        for label, (base, targets) in plan.items():
            runs[f"warm-{label}"] = run_wrk(wrk, base, targets, f"warm-{label}", warmup_seconds, workdir)
        for n in range(ROUNDS):  # interleaved: a change in the machine's other load hits all alike
            for label, (base, targets) in plan.items():
                prefix = f"r{n}-{label}"
                runs[prefix] = run_wrk(wrk, base, targets, prefix, seconds / ROUNDS, workdir)
                rounds[label].append(runs[prefix])
                print(f"[throughput] {prefix}: {describe(runs[prefix])}", file=sys.stderr)
    try:
        verify(runs, env)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc} (server logs: {workdir})") from exc
    key, run_id = pairs[0]
    in_process = _subprocess_json(["--server-time", key, run_id], env)["samples_ms"]
    shutil.rmtree(workdir, ignore_errors=True)
    return figures({label: combined(served) for label, served in rounds.items()}, in_process, agents)


def figures(served: dict[str, dict], in_process: list[float], agents: int) -> list[Figure]:
    """The table: each endpoint's throughput and latency, and the ratios the process model must hold."""
    minimal, bare, gate = served["minimal-bare"], served["bare"], served["gate"]
    drive = f"wrk -t{THREADS} -c{CONNECTIONS} over {agents} agents, PostgreSQL pool, Redis"
    model = f"Granian WSGI ({WORKERS} workers) behind the nginx front door"
    rows = [
        Figure("minimal Django app, one INSERT (Granian WSGI)", minimal["per_second"], "req/s"),
        Figure("minimal app p50", minimal["p50_us"] / 1000, "ms"),
        Figure("minimal app p99", minimal["p99_us"] / 1000, "ms"),
        Figure("project bare view, one INSERT", bare["per_second"], "req/s", minimal["per_second"], "the minimal app"),
        Figure("project bare view p50", bare["p50_us"] / 1000, "ms"),
        Figure("project bare view p99", bare["p99_us"] / 1000, "ms"),
        Figure("gate single read", gate["per_second"], "calls/s", bare["per_second"], "the project's bare view"),
        Figure("gate single read p50", gate["p50_us"] / 1000, "ms"),
        Figure("gate single read p99", gate["p99_us"] / 1000, "ms", gate["p50_us"] / 1000, "the gate's own p50"),
    ]
    for label, name in (("asgi-bare", "project bare view"), ("asgi-gate", "gate single read")):
        asgi = served[label]
        reference = served[label.removeprefix("asgi-")]
        rows += [
            Figure(f"{name}, uvicorn ASGI alone", asgi["per_second"], "req/s", reference["per_second"], model),
            Figure(f"{name} p99, uvicorn ASGI alone", asgi["p99_us"] / 1000, "ms"),
        ]
    rows += [
        Figure("gate single-call server time p50 (in process)", percentile(in_process, 50), "ms"),
        Figure("gate single-call server time p99 (in process)", percentile(in_process, 99), "ms"),
    ]
    for row in rows:
        if row.reference_name:
            row.reference_name += f" ({drive})"
    return rows


def run() -> list[Figure]:
    return throughput()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--warmup", type=float, default=WARMUP_SECONDS)
    args = parser.parse_args()
    print_table(throughput(args.seconds, args.warmup), "Throughput: gate against a bare endpoint")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seed"]:
        print(json.dumps(seed(int(sys.argv[2]))))
    elif sys.argv[1:2] == ["--count"]:
        print(json.dumps(count_outcomes(sys.argv[2:])))
    elif sys.argv[1:2] == ["--server-time"]:
        print(json.dumps(server_time(sys.argv[2], sys.argv[3])))
    else:
        sys.exit(main())
