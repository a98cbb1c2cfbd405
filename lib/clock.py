"""The clock that timing rules read: breakers' open and half-open windows, retry backoff, lease expiry,
long-poll waits. Code calls `clock.now()`, `clock.time()`, `clock.monotonic()` and `clock.sleep()`
instead of `timezone.now()` / `time.*` wherever the passing of time decides something.

It is the real clock plus an offset that starts at zero and only grows. `advance(seconds)` moves it
forward; inside `controlled()` a `sleep()` advances it instead of waiting. That is how a test sees a
30-second breaker half-open, or a backoff elapse, in no real time (the `clock` fixture in
tests/conftest.py). Another process has its own offset: a test that needs one to agree passes
`offset()` along and that process calls `advance()` with it.
"""

from __future__ import annotations

import asyncio
import threading
import time as _time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.utils import timezone

_lock = threading.Lock()
_offset = 0.0
_sleeps_advance = False


def time() -> float:
    """Seconds since the epoch, as `time.time()`."""
    return _time.time() + _offset


def monotonic() -> float:
    """For deadlines and durations, as `time.monotonic()`."""
    return _time.monotonic() + _offset


def now() -> datetime:
    """The current moment, as `django.utils.timezone.now()`."""
    return timezone.now() + timedelta(seconds=_offset)


def sleep(seconds: float) -> None:
    if _sleeps_advance:
        advance(seconds)
    else:
        _time.sleep(seconds)


async def asleep(seconds: float) -> None:
    if _sleeps_advance:
        advance(seconds)
        await asyncio.sleep(0)  # still give other tasks their turn
    else:
        await asyncio.sleep(seconds)


def advance(seconds: float) -> None:
    """Move the clock forward; it never goes back."""
    global _offset
    if seconds < 0:
        raise ValueError("the clock only moves forward")
    with _lock:
        _offset += seconds


def offset() -> float:
    """How far this process's clock is ahead of the real one, in seconds."""
    return _offset


@contextmanager
def controlled() -> Iterator[None]:
    """Sleeps advance the clock instead of waiting; on leaving, the clock is the real one again."""
    global _offset, _sleeps_advance
    _sleeps_advance = True
    try:
        yield
    finally:
        with _lock:
            _offset, _sleeps_advance = 0.0, False
