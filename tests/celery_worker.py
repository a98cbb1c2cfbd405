"""A real Celery worker process for live tests: `celery -A console worker` as a deployment starts it (no -Q,
so every queue), on the test database and Redis, in a process group of its own so that stopping it stops
its children too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings


def wait_for(predicate: Callable[[], object], timeout: float, what: str, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker on this test run's PostgreSQL database and Redis."""
    database = settings.DATABASES["default"]
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        **extra,
    }


def start_worker(name: str, log: Path, env: dict[str, str], *options: str, ready: bool = True) -> subprocess.Popen:
    """A worker named `name@host` logging to `log`; with `ready`, once it says so (else the log's tail)."""
    command = [sys.executable, "-m", "celery", "-A", "console", "worker", "-n", f"{name}@%h", "--loglevel=INFO"]
    command += ["--without-gossip", "--without-mingle", *options]
    process = subprocess.Popen(
        command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, cwd=settings.BASE_DIR
    )
    if ready:
        deadline = time.monotonic() + 60
        while "ready" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                stop_worker(process)
                raise AssertionError(f"the worker {name} did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
    return process


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
