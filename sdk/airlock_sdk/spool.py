"""The spool: every call decided locally, and its result, kept on disk until Airlock has it.

One SQLite file in the SDK's data directory (beside the snapshot cache). A decision is committed
before the tool runs, so a crash of the agent's process between the two leaves the decision
readable by the next process; the uploader sends `pending()` in decision order and marks what the
server acknowledged. WAL with `synchronous=NORMAL`: a commit survives the process being killed
(the write is in the operating system's hands once `COMMIT` returns); only a power loss can take
the last commits back, which `synchronous=FULL` would also cover at several times the cost
(docs/performance.md).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

STATUSES = ("decided", "succeeded", "failed")

SCHEMA = """
CREATE TABLE IF NOT EXISTS spooled_call (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    skill TEXT NOT NULL,
    version TEXT NOT NULL,
    arguments TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL,
    bundle_number INTEGER NOT NULL,
    decided_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'decided',
    result TEXT,
    error TEXT,
    finished_at TEXT,
    uploaded INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS spooled_call_pending ON spooled_call (uploaded, sequence);
"""

COLUMNS = (
    "call_id, run_id, skill, version, arguments, verdict, reason, bundle_number, decided_at, "
    "status, result, error, finished_at, sequence"
)


@dataclass(frozen=True)
class SpooledCall:
    """One locally decided call as the spool holds it."""

    call_id: str
    run_id: str
    skill: str
    version: str
    arguments: dict
    verdict: str
    reason: str
    bundle_number: int
    decided_at: datetime
    status: str  # "decided" | "succeeded" | "failed"
    result: Any | None
    error: dict | None
    finished_at: datetime | None
    sequence: int


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _row(row: tuple) -> SpooledCall:
    (call_id, run_id, skill, version, arguments, verdict, reason, bundle, decided, status, result, error, done, seq) = (
        row
    )
    return SpooledCall(
        call_id=call_id,
        run_id=run_id,
        skill=skill,
        version=version,
        arguments=json.loads(arguments),
        verdict=verdict,
        reason=reason,
        bundle_number=int(bundle),
        decided_at=datetime.fromisoformat(decided),
        status=status,
        result=_loads(result),
        error=_loads(error),
        finished_at=_when(done),
        sequence=int(seq),
    )


class Spool:
    """The spool file at `path` (created on first use). Safe to share between threads of one process
    and between processes: SQLite serialises the writers."""

    def __init__(self, path: Path, *, synchronous: str = "NORMAL") -> None:
        """`synchronous="FULL"` also survives a power loss, at the cost measured in docs/performance.md."""
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous is NORMAL or FULL.")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, parameters: Iterable[Any]) -> int:
        with self._lock:
            return self._db.execute(sql, tuple(parameters)).rowcount

    def record_decision(
        self,
        *,
        call_id: str,
        run_id: str,
        skill: str,
        version: str,
        arguments: dict,
        verdict: str,
        reason: str,
        bundle_number: int,
        decided_at: datetime,
    ) -> None:
        """Commit the decision; it is on disk when this returns. A call id already spooled is kept as first
        recorded (a retried decision changes nothing)."""
        self._write(
            "INSERT INTO spooled_call (call_id, run_id, skill, version, arguments, verdict, reason, bundle_number, "
            "decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (call_id) DO NOTHING",
            (
                call_id,
                run_id,
                skill,
                version,
                json.dumps(arguments, separators=(",", ":"), default=str),
                verdict,
                reason,
                int(bundle_number),
                decided_at.isoformat(),
            ),
        )

    def record_result(
        self, call_id: str, *, status: str, result: Any = None, error: dict | None = None, finished_at: datetime
    ) -> None:
        """The outcome of a decided call: once (a second result for the same call is ignored)."""
        if status not in STATUSES[1:]:
            raise ValueError(f"A result's status is 'succeeded' or 'failed', not {status!r}.")
        changed = self._write(
            "UPDATE spooled_call SET status = ?, result = ?, error = ?, finished_at = ? "
            "WHERE call_id = ? AND status = 'decided'",
            (
                status,
                None if result is None else json.dumps(result, default=str),
                None if error is None else json.dumps(error, default=str),
                finished_at.isoformat(),
                call_id,
            ),
        )
        if not changed and self.get(call_id) is None:
            raise KeyError(f"No decision for call {call_id!r} is in the spool.")

    def get(self, call_id: str) -> SpooledCall | None:
        with self._lock:
            row = self._db.execute(f"SELECT {COLUMNS} FROM spooled_call WHERE call_id = ?", (call_id,)).fetchone()
        return None if row is None else _row(row)

    def pending(self) -> list[SpooledCall]:
        """Every call not yet acknowledged by Airlock, in decision order."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM spooled_call WHERE uploaded = 0 ORDER BY sequence"
            ).fetchall()
        return [_row(row) for row in rows]

    def mark_uploaded(self, call_ids: Iterable[str]) -> None:
        ids = list(call_ids)
        if not ids:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("UPDATE spooled_call SET uploaded = 1 WHERE call_id = ?", [(i,) for i in ids])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
