"""Await a coroutine from sync code, on an event loop that lives as long as the process.

asgiref's `async_to_sync`, called with no request's event loop above it (a Celery task, a management
command, a WSGI test client), starts an event loop for the call and closes it after. channels_redis keeps
its Redis connections per event loop, so every such call connected to Redis and hung up again: about
3 ms of CPU per approval hint sent from a worker. Outside a request, the coroutine therefore runs on one
loop per process, kept on a daemon thread (started again in a forked child). Inside an ASGI request,
`async_to_sync` hands it to the server's own loop, where the in-memory channel layer's consumers are:
that path stays as it is.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asgiref.sync import SyncToAsync, async_to_sync

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _request_loop_above() -> bool:
    """True on a request's sync thread, whose server loop runs in this process (asgiref's own test)."""
    local = SyncToAsync.threadlocal
    loop = getattr(local, "main_event_loop", None)
    return loop is not None and loop.is_running() and getattr(local, "main_event_loop_pid", None) == os.getpid()


def _process_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid
    with _lock:
        if _loop is None or _loop_pid != os.getpid():  # a forked child inherits the object, not the thread
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="airlock-awaiting", daemon=True).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def await_from_sync(make: Callable[[], Awaitable[T]], *, timeout_s: float) -> T:
    """`make()`'s result, awaited on the request's loop if there is one, else on the process's own;
    TimeoutError after `timeout_s` on the latter (the coroutine is cancelled)."""
    if _request_loop_above():

        async def awaited() -> T:  # async_to_sync warns on every call when given a plain callable
            return await make()

        return async_to_sync(awaited)()
    future = asyncio.run_coroutine_threadsafe(make(), _process_loop())
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()
        raise
