"""Downstream tools for the approval tests, importable by a Celery worker subprocess
(`celery worker -I tests.approvals.worker_tools`).

`refund` stands for a real downstream that honours idempotency keys: its ledger file (one JSON line
per real effect) is shared across processes, and a repeated key returns the first result.
Set AIRLOCK_TEST_LEDGER to the ledger path and AIRLOCK_TEST_SLOW_AFTER to sleep after executing
(so a test can kill the worker between the downstream effect and Airlock recording it).

In this process it also keeps `received`: the arguments of every invocation, in order, before the
ledger deduplicates anything (a repeated delivery shows up there even when it has no effect). The
`executions` fixture of tests/approvals/conftest.py exposes it. `pause_next()` holds the next
invocation inside the downstream until the test releases it: a delivery still in flight.
"""

import copy
import fcntl
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from runs.adapters.python import register

DEFAULT_LEDGER = "/tmp/airlock-approvals-test-ledger.jsonl"
PAUSE_LIMIT_S = 30

received: list[dict] = []


@dataclass
class Pause:
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


_pauses: list[Pause] = []
_lock = threading.Lock()


def pause_next() -> Pause:
    """Hold the next invocation (after it is received, before its effect) until `release` is set."""
    pause = Pause()
    with _lock:
        _pauses.append(pause)
    return pause


def reset() -> None:
    """Forget what was received in this process and let any held invocation go."""
    with _lock:
        received.clear()
        for pause in _pauses:
            pause.release.set()
        _pauses.clear()


def ledger_path() -> Path:
    return Path(os.environ.get("AIRLOCK_TEST_LEDGER", DEFAULT_LEDGER))


def executions() -> list[dict]:
    """The ledger: one entry per real effect (deduplicated by idempotency key), across processes."""
    path = ledger_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@register("approvals_test.refund", effect="read")
def refund(*, arguments, context):
    with _lock:
        received.append(copy.deepcopy(arguments))
        pause = _pauses.pop(0) if _pauses else None
    if pause is not None:
        pause.arrived.set()
        pause.release.wait(PAUSE_LIMIT_S)
    path = ledger_path()
    path.touch()
    with path.open("r+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        for line in ledger.read().splitlines():
            entry = json.loads(line)
            if context.idempotency_key and entry["key"] == context.idempotency_key:
                return entry["result"]
        result = {
            "refund_id": f"rf_{uuid.uuid4().hex[:12]}",
            "amount_cents": arguments.get("amount_cents"),
            "customer_id": arguments.get("customer_id"),
        }
        ledger.write(json.dumps({"key": context.idempotency_key, "pid": os.getpid(), "result": result}) + "\n")
        ledger.flush()
    slow = float(os.environ.get("AIRLOCK_TEST_SLOW_AFTER", "0") or 0)
    if slow:
        marker = path.with_suffix(".executed")
        marker.write_text(str(os.getpid()))
        time.sleep(slow)
    return result
