"""Downstream tools for the approval end-to-end tests, importable by a Celery worker subprocess
(`celery worker -I tests.approvals.worker_tools`).

`refund` stands for a real downstream that honours idempotency keys: its ledger file (one JSON line
per real execution) is shared across processes, and a repeated key returns the first result.
Set AIRLOCK_TEST_LEDGER to the ledger path and AIRLOCK_TEST_SLOW_AFTER to sleep after executing
(so a test can kill the worker between the downstream effect and Airlock recording it).
"""

import fcntl
import json
import os
import time
import uuid
from pathlib import Path

from runs.adapters.python import register

DEFAULT_LEDGER = "/tmp/airlock-approvals-test-ledger.jsonl"


def ledger_path() -> Path:
    return Path(os.environ.get("AIRLOCK_TEST_LEDGER", DEFAULT_LEDGER))


def executions() -> list[dict]:
    path = ledger_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@register("approvals_test.refund")
def refund(*, arguments, context):
    path = ledger_path()
    path.touch()
    with path.open("r+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        for line in ledger.read().splitlines():
            entry = json.loads(line)
            if context.idempotency_key and entry["key"] == context.idempotency_key:
                return entry["result"]
        result = {"refund_id": f"rf_{uuid.uuid4().hex[:12]}",
                  "amount_cents": arguments.get("amount_cents"), "customer_id": arguments.get("customer_id")}
        ledger.write(json.dumps({"key": context.idempotency_key, "pid": os.getpid(), "result": result}) + "\n")
        ledger.flush()
    slow = float(os.environ.get("AIRLOCK_TEST_SLOW_AFTER", "0") or 0)
    if slow:
        marker = path.with_suffix(".executed")
        marker.write_text(str(os.getpid()))
        time.sleep(slow)
    return result
