"""The single dispatch point for allowed calls: adapter lookup, per-call timeout, typed outcome.

`execute(...)` is what the gate and the approval resume path call; the execution-plane work
(retries, circuit breakers, mcp://) extends it here. Adapters run on a bounded shared thread pool
(the Django ORM is synchronous); a call that outlives its timeout is reported and left to finish.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from runs.adapters import InvocationContext, get_adapter
from runs.errors import CallError, TimeoutUnknown, Transient, internal_from
from runs.plane import execution as plane

logger = logging.getLogger(__name__)
DEFAULT_TIMEOUT_MS = 10_000
READ_EFFECTS = frozenset({"read"})
BREAKER_OPEN_CODES = frozenset({"circuit_open", "circuit_half_open"})  # the skill is unavailable for now

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.AIRLOCK_GATE_WORKERS, thread_name_prefix="airlock-gate")
        return _pool


@dataclass
class Outcome:
    """What one execution produced: content or a typed error, with when it ran."""

    content: Any = None
    error: CallError | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    trail: Any = field(default=None, repr=False)  # runs.plane.execution.Trail: attempts, breaker, job
    provenance: dict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def timeout_of(manifest: dict) -> float:
    return (manifest.get("execution", {}).get("timeout_ms") or DEFAULT_TIMEOUT_MS) / 1000


def _invoke(manifest: dict, arguments: dict, context: InvocationContext, outcome: Outcome) -> Outcome:
    outcome.started_at = timezone.now()
    try:
        adapter = get_adapter(manifest["execution"]["adapter"])
        outcome.content = plane.invoke(
            adapter, manifest=manifest, arguments=arguments, context=context, outcome=outcome
        )
    except CallError as exc:
        outcome.error = exc
    except Exception as exc:  # the agent gets a generic internal error; the span gets the exception's type
        logger.exception("Skill %s raised in run %s call %s", manifest.get("name"), context.run_id, context.call_id)
        outcome.error = internal_from(exc)
    finally:
        outcome.finished_at = timezone.now()
        connections.close_all()
    return outcome


def submit(*, manifest: dict, arguments: dict, context: InvocationContext) -> tuple[Future, Outcome]:
    outcome = Outcome(trail=plane.prepare(manifest=manifest, context=context))
    return pool().submit(_invoke, manifest, arguments, context, outcome), outcome


def wait(
    future: Future, outcome: Outcome, *, manifest: dict, effect: str, timeout_s: float, remaining_s: float | None = None
) -> Outcome:
    """The outcome within the call's timeout; `remaining_s` when part of it was already spent waiting on others."""
    try:
        return plane.finish(
            future.result(timeout=timeout_s if remaining_s is None else remaining_s), manifest=manifest, effect=effect
        )
    except FutureTimeout:
        outcome.finished_at = timezone.now()
        if effect in READ_EFFECTS:
            outcome.error = Transient(
                f"The call did not finish within {timeout_s:g}s; it is safe to retry.", code="timeout", retry_after=1
            )
        else:
            outcome.error = TimeoutUnknown(
                f"The call did not finish within {timeout_s:g}s and its outcome is unknown; do not repeat it with a "
                "new idempotency key. Repeat with the same key to get the recorded outcome."
            )
        return plane.finish(outcome, manifest=manifest, effect=effect)


def execute(*, manifest: dict, effect: str, arguments: dict, context: InvocationContext) -> Outcome:
    """Run one call through its adapter with its timeout (blocking)."""
    timeout_s = timeout_of(manifest)
    future, outcome = submit(manifest=manifest, arguments=arguments, context=_with_timeout(context, timeout_s))
    return wait(future, outcome, manifest=manifest, effect=effect, timeout_s=timeout_s)


def _with_timeout(context: InvocationContext, timeout_s: float) -> InvocationContext:
    from dataclasses import replace

    return replace(context, timeout_s=timeout_s)


def execute_concurrently(items: list[tuple[dict, str, dict, InvocationContext]]) -> list[Outcome]:
    """Start every (manifest, effect, arguments, context) at once; wait for each within its own timeout."""
    started = []
    for manifest, effect, arguments, context in items:
        timeout_s = timeout_of(manifest)
        future, outcome = submit(manifest=manifest, arguments=arguments, context=_with_timeout(context, timeout_s))
        started.append((future, outcome, manifest, effect, timeout_s, time.monotonic() + timeout_s))
    # Each call's timeout runs from its start, not from when we got round to waiting on it.
    return [
        wait(f, o, manifest=m, effect=e, timeout_s=t, remaining_s=max(0.0, deadline - time.monotonic()))
        for f, o, m, e, t, deadline in started
    ]
