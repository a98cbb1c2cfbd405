"""Shared helpers for the benchmark scripts: Django setup, percentiles and one table format.

Every script exposes `run() -> list[Figure]` and can be run alone (`python -m bench.gate`);
`python -m bench` (make bench) runs them all and prints one table.
"""

import os
import socket
import statistics
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def uvicorn_command(port: int, *options: str) -> list[str]:
    """Airlock's ASGI app under uvicorn on loopback, as the benchmarks and live-server tests start it."""
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
