"""A downstream that counts its real executions, for the exactly-once tests on PostgreSQL.

`exactly_once.charge` is a python adapter standing for a payment API that does NOT deduplicate:
every invocation is one more charge. Each one appends a line to a ledger file shared by every
process (AIRLOCK_EXACTLY_ONCE_LEDGER), so a worker subprocess and the test process count at the
same edge. With AIRLOCK_EXACTLY_ONCE_DIE=1 the process SIGKILLs itself right after the charge:
a worker dying between the side effect and Airlock recording it. `hold_next()` keeps the next
invocation inside the downstream until the test releases it: a delivery still in flight.

`resume_main` is what a worker subprocess runs (`python -c`, see the tests).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from runs.adapters.python import register

LEDGER_ENV = "AIRLOCK_EXACTLY_ONCE_LEDGER"
DIE_ENV = "AIRLOCK_EXACTLY_ONCE_DIE"
HOLD_LIMIT_S = 15


@dataclass
class Hold:
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


_holds: list[Hold] = []
_lock = threading.Lock()


def hold_next() -> Hold:
    hold = Hold()
    with _lock:
        _holds.append(hold)
    return hold


def reset() -> None:
    with _lock:
        for hold in _holds:
            hold.release.set()
        _holds.clear()


def ledger_path() -> Path:
    return Path(os.environ[LEDGER_ENV])


def executions() -> list[dict]:
    """One entry per charge that really happened, in any process."""
    path = ledger_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@register("exactly_once.charge", effect="read")
def charge(*, arguments, context):
    with _lock:
        hold = _holds.pop(0) if _holds else None
    if hold is not None:
        hold.arrived.set()
        hold.release.wait(HOLD_LIMIT_S)
    charge_id = f"ch_{uuid.uuid4().hex[:12]}"
    with ledger_path().open("a") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        ledger.write(
            json.dumps(
                {
                    "charge_id": charge_id,
                    "key": context.idempotency_key,
                    "call_id": context.call_id,
                    "pid": os.getpid(),
                    "arguments": arguments,
                }
            )
            + "\n"
        )
        ledger.flush()
        os.fsync(ledger.fileno())
    if os.environ.get(DIE_ENV) == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the effect happened; Airlock never hears of it
    return {"charge_id": charge_id, "amount_cents": arguments.get("amount_cents")}


def resume_main(approval_id: int) -> None:
    """A worker's delivery of the resume task, in a process of its own (django.setup() done by the caller)."""
    from approvals.services import resume_approval

    approval = resume_approval(approval_id=approval_id)
    print(json.dumps({"status": approval.status, "outcome": approval.outcome}))
