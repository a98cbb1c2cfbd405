"""Stepping aside: a request that starts waiting on something other than its own work gives up its turn.

A web worker lets only a few requests run their Django code at once (airlock/web_process.py), because
Python runs one thread of a process at a time: sixteen requests let in together take turns on the
interpreter and each takes sixteen times as long. A request that then waits on a downstream tool or on a
run's next event is not using its turn; `step_aside()` hands it to the next request in line. The request
goes on without a turn and never queues for one again, so stepping aside cannot deadlock.

Outside a web worker's request (a test client, Celery, a management command) `step_aside()` does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

_step_aside: ContextVar[Callable[[], None] | None] = ContextVar("airlock_step_aside", default=None)


def step_aside() -> None:
    """Give this request's turn to the next one in line (once; later calls do nothing)."""
    release = _step_aside.get()
    if release is not None:
        release()


@contextlib.contextmanager
def turn(release: Callable[[], None]) -> Iterator[None]:
    """While the block runs, `step_aside()` calls `release`; the context (and the threads the request's sync
    code runs on, which copy it) carries it."""
    token = _step_aside.set(release)
    try:
        yield
    finally:
        _step_aside.reset(token)


__all__ = ["step_aside", "turn"]
