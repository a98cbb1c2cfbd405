"""Uploading the spool: calls decided locally go to Airlock once it answers again.

`SpoolUploader.flush()` sends the spool's pending calls, run by run and in decision order, in batches of
`POST /api/v1/runs/{run_id}/local-calls`, and marks uploaded every call the server answered for (recorded,
or refused with a typed error that sending again would not change). A batch that gets no answer, or a 5xx,
stays pending and is sent again on the next flush; the server records each call id once, so sending twice
is harmless. The client flushes by itself on the first answer after Airlock was unreachable, and at most
every `min_interval` seconds after that; `Airlock.flush_spool()` flushes now.

A call still `decided` (its tool has not returned) is held back while it may be running: while the client
says it is in flight, and for `unfinished_grace` seconds after its decision. After that its process is
presumed dead and the call is uploaded as decided; the server records its outcome as unknown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airlock_sdk.errors import AirlockError
from airlock_sdk.spool import Spool, SpooledCall

logger = logging.getLogger("airlock_sdk")

BATCH_SIZE = 100  # the server's limit per upload (runs.local_calls.MAX_UPLOAD)


@dataclass
class FlushReport:
    """What one flush did: calls recorded by Airlock, refused (with the typed error), flagged by today's
    policy, and still pending (not sent, or sent without an answer)."""

    recorded: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    pending: int = 0
    errors: list[str] = field(default_factory=list)


def upload_body(call: SpooledCall) -> dict[str, Any]:
    """The call as the upload endpoint takes it (the spool's own fields, times in ISO 8601)."""
    return {
        "call_id": call.call_id,
        "run_id": call.run_id,
        "skill": call.skill,
        "version": call.version,
        "arguments": call.arguments,
        "verdict": call.verdict,
        "reason": call.reason,
        "bundle_number": call.bundle_number,
        "decided_at": _iso(call.decided_at),
        "status": call.status,
        "result": call.result,
        "error": call.error,
        "finished_at": _iso(call.finished_at) if call.finished_at else None,
        "sequence": call.sequence,
    }


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return _aware(moment).isoformat()


class SpoolUploader:
    def __init__(
        self,
        transport: Any,
        spool: Spool,
        *,
        batch_size: int = BATCH_SIZE,
        min_interval: float = 10.0,
        unfinished_grace: float = 300.0,
        in_flight: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.transport = transport
        self.spool = spool
        self.batch_size = max(1, min(batch_size, BATCH_SIZE))
        self.min_interval = min_interval
        self.unfinished_grace = unfinished_grace
        self.in_flight = in_flight or (lambda: ())
        self.last_flush = 0.0
        self._lock = threading.Lock()

    def answered(self, *, was_unreachable: bool) -> None:
        """The transport got an answer: flush when Airlock was unreachable before it, or when due."""
        if not was_unreachable and time.monotonic() - self.last_flush < self.min_interval:
            return
        try:
            self.flush()
        except Exception as exc:  # the caller's own request succeeded; the spool waits for the next flush
            logger.warning("Could not upload the spool: %s", exc)

    def ready(self, now: datetime | None = None) -> list[SpooledCall]:
        """The pending calls to send now, in decision order."""
        now = now or datetime.now(UTC)
        running = set(self.in_flight())
        ready = []
        for call in self.spool.pending():
            if call.status == "decided":
                age = (now - _aware(call.decided_at)).total_seconds()
                if call.call_id in running or age < self.unfinished_grace:
                    continue
            ready.append(call)
        return ready

    def flush(self) -> FlushReport:
        """Send what is ready; a second flush running at the same time returns at once with nothing done."""
        report = FlushReport()
        if not self._lock.acquire(blocking=False):
            return report
        try:
            self.last_flush = time.monotonic()
            by_run: dict[str, list[SpooledCall]] = {}
            for call in self.ready():
                by_run.setdefault(call.run_id, []).append(call)
            for run_id, calls in by_run.items():
                for start in range(0, len(calls), self.batch_size):
                    if not self._send(run_id, calls[start : start + self.batch_size], report):
                        break  # this run's later calls wait too, so the server sees them in order
            report.pending = len(self.spool.pending())
        finally:
            self._lock.release()
        return report

    def _send(self, run_id: str, calls: list[SpooledCall], report: FlushReport) -> bool:
        try:
            body = self.transport.json(
                "POST", f"/api/v1/runs/{run_id}/local-calls", safe=True, json={"calls": [upload_body(c) for c in calls]}
            )
        except AirlockError as exc:
            report.errors.append(f"run {run_id}: {exc}")
            logger.warning("The spooled calls of run %s stay pending: %s", run_id, exc)
            return False
        answers = body.get("results", []) if isinstance(body, dict) else []
        answered = []
        for call, answer in zip(calls, answers, strict=False):  # one answer per call, in the order sent
            if answer.get("status") == "recorded":
                report.recorded.append(call.call_id)
                if answer.get("flagged"):
                    report.flagged.append(call.call_id)
            else:
                report.refused.append({**answer, "call_id": call.call_id})
                logger.warning("Airlock refused spooled call %s: %s", call.call_id, answer.get("error"))
            answered.append(call.call_id)
        self.spool.mark_uploaded(answered)
        return True


__all__ = ["BATCH_SIZE", "FlushReport", "SpoolUploader", "upload_body"]
