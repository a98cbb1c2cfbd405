"""Shared helpers for the benchmark scripts: Django setup, percentiles and one table format.

Every script exposes `run() -> list[Figure]` and can be run alone (`python -m bench.gate`);
`python -m bench` (make bench) runs them all and prints one table.
"""

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from airlock.serving import free_port, front_door_command, stream_command, web_command

__all__ = [
    "BARE_PATH",
    "Served",
    "production_model",
    "started",
    "Figure",
    "free_port",
    "fresh_database",
    "percentile",
    "print_table",
    "server_env",
    "summary",
    "uvicorn_command",
    "wait_until_answers",
]

BARE_PATH = "/api/bench/bare"  # the bare endpoint (bench/bare.py) of the throughput bench


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    reference: float | None = None  # the side-by-side figure, when the script has one
    reference_name: str = ""

    @property
    def ratio(self) -> float | None:
        if self.reference in (None, 0):
            return None
        return self.value / self.reference


def percentile(samples: list[float], pct: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(samples, 50),
        "p95": percentile(samples, 95),
        "p99": percentile(samples, 99),
        "max": max(samples) if samples else float("nan"),
        "mean": statistics.fmean(samples) if samples else float("nan"),
    }


def print_table(figures: list[Figure], title: str = "") -> None:
    if title:
        print(f"\n== {title}")
    print(f"{'figure':<58} {'value':>12} {'unit':<10} {'reference':>12} {'ratio':>8}")
    for figure in figures:
        reference = f"{figure.reference:12.2f}" if figure.reference is not None else f"{'':>12}"
        ratio = f"{figure.ratio:8.2f}" if figure.ratio is not None else f"{'':>8}"
        print(f"{figure.name:<58} {figure.value:12.2f} {figure.unit:<10} {reference} {ratio}")
        if figure.reference_name:
            print(f"{'':<4}reference: {figure.reference_name}")


def uvicorn_command(port: int, *options: str) -> list[str]:
    """Airlock's ASGI app alone under uvicorn on loopback (every request through Django's ASGI handler, as the
    embedded `make run` serves it), as the benchmarks and live-server tests start it."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "airlock.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *options,
    ]


ROOT = Path(__file__).resolve().parent.parent
# Through the front door, a GET without a key answers 401 or 405 from web and from stream once each is up
# (the front door itself answers 502 until then; /healthz is 503 without a Celery worker).
WEB_PROBE = "/api/v1/runs"
STREAM_PROBE = "/api/v1/runs/00000000-0000-4000-8000-000000000000/events"


@dataclass
class Served:
    base: str  # the one origin
    pids: dict[str, int]  # each server's process (granian's tree holds its workers)


def wait_until_answers(url: str, processes: dict[str, subprocess.Popen], timeout_s: float = 120) -> None:
    """Until `url` answers below 500; fails early if one of `processes` exits."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in time")


@contextmanager
def started(commands: dict[str, list[str]], env: dict, workdir: Path) -> Iterator[dict[str, subprocess.Popen]]:
    """Each named command for the block (stderr in workdir/<name>.log, printed if the block fails)."""
    logs = {name: workdir / f"{name}.log" for name in commands}
    processes = {
        name: subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=logs[name].open("w"))
        for name, command in commands.items()
    }
    try:
        yield processes
    except Exception:
        for log in logs.values():
            print(f"--- {log}\n{log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@contextmanager
def production_model(env: dict, workdir: Path, *, workers: int = 2) -> Iterator[Served]:
    """Airlock as deployed (airlock/serving.py) on free loopback ports: Granian WSGI with `workers` processes,
    the uvicorn stream process and the nginx front door; yields once both answer through the front door."""
    web, stream, door = free_port(), free_port(), free_port()
    front_door = front_door_command(
        workdir / "front-door", listen=f"127.0.0.1:{door}", web=f"127.0.0.1:{web}", stream=f"127.0.0.1:{stream}"
    )
    if front_door is None:
        raise RuntimeError("nginx is missing (apt-get install nginx-light): the front door of the process model")
    commands = {
        "web": web_command("127.0.0.1", web, workers=workers),
        "stream": [*stream_command("127.0.0.1", stream), "--log-level", "warning", "--no-access-log"],
        "front-door": front_door,
    }
    base = f"http://127.0.0.1:{door}"
    with started(commands, env, workdir) as processes:
        wait_until_answers(base + WEB_PROBE, processes)
        wait_until_answers(base + STREAM_PROBE, processes)
        yield Served(base=base, pids={name: process.pid for name, process in processes.items()})


def server_env(workdir, **overrides: str) -> dict[str, str]:
    """The environment of a production-like Airlock server a benchmark starts: DEBUG off, a fresh
    signing key, plain HTTP on loopback. `overrides` set or replace variables; None removes one."""
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = (
        Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.gate_settings",
            "DEBUG": "0",
            "SECRET_KEY": "bench-" + "x" * 50,
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0",
            "SESSION_COOKIE_SECURE": "0",
            "AIRLOCK_SIGNING_KEY": pem,
            "AIRLOCK_VAR_DIR": str(workdir),
            "LOG_LEVEL": "WARNING",
            "AIRLOCK_PUBLIC_URL": "http://127.0.0.1",
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        }
    )
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def fresh_database(url: str, *, create: bool = True) -> None:
    """Drop a benchmark's own PostgreSQL database and, unless told otherwise, create it empty again."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl().replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            connection.execute(f'CREATE DATABASE "{name}"')
