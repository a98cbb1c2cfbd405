"""How a web worker process runs Django's HTTP handling: a few requests at a time, request threads reused,
garbage collection tuned.

Django's own ASGI handler lets every request into its Django code at once, gives each a new thread (a fresh
single-thread executor per request) and lets the interpreter's collector run with its defaults. Under the
gate's load all three cost more than the request itself: requests taking turns on the interpreter lock,
starting a thread per request, and full collections that walk every object the project imported (150 ms
each, several times a minute, pausing every request in flight).
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

from lib import admission

IDLE_THREADS_KEPT = 64
# Young objects between collections. The interpreter's 700 collects every few requests; at this size a
# request's short-lived cycles still die young, and a collection stays near a millisecond.
YOUNG_GENERATION_THRESHOLD = 50_000


def _nothing() -> None:
    pass


class Turns:
    """At most `at_once` requests of this worker run their Django code together; the others wait in line,
    in the order they came, as coroutines (no thread, no connection). Waiting must never stall a worker:
    - a request that starts waiting on something other than its own work (a downstream tool, a run's next
      event) steps aside (lib.admission) and goes on without a turn;
    - no request waits longer than `patience_s`: then it goes in anyway. A request that holds its turn
      while it waits on a row lock or a slow query costs the others at most that long.
    `at_once` 0 lets every request in at once, as Django does."""

    def __init__(self, at_once: int, patience_s: float) -> None:
        self.at_once, self.patience_s = at_once, patience_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._free: asyncio.Semaphore | None = None

    async def take(self) -> Callable[[], None]:
        """Wait for a turn; returns the function that gives it back (safe from any thread, once)."""
        if not self.at_once:
            return _nothing
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a worker has one loop; a test may serve the app from several in turn
            self._loop, self._free = loop, asyncio.Semaphore(self.at_once)
        free = self._free
        try:
            await asyncio.wait_for(free.acquire(), self.patience_s)
        except TimeoutError:
            return _nothing  # in without a turn
        lock, given_back = threading.Lock(), False

        def give_back() -> None:
            nonlocal given_back
            with lock:
                if given_back:
                    return
                given_back = True
            loop.call_soon_threadsafe(free.release)

        return give_back


class PooledThreadsASGIHandler(ASGIHandler):
    """Django's ASGI handler with a few requests at a time (Turns) and each request's sync code on a thread
    borrowed for that request.

    As in Django's, a request's sync middleware and view run on one thread of their own, so a request
    waiting on a slow tool holds up no other. The threads are reused instead of started per request. A
    request's turn starts once its body has arrived and ends when its response is ready, before it is sent:
    a slow client holds none."""

    def __init__(self, turns: Turns | None = None) -> None:
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []  # touched only from the worker's event loop
        self.turns = turns or Turns(settings.AIRLOCK_WEB_REQUESTS_AT_ONCE, settings.AIRLOCK_WEB_TURN_PATIENCE_MS / 1000)

    async def run_get_response(self, request):
        give_back = await self.turns.take()
        try:
            with admission.turn(give_back):
                return await super().run_get_response(request)
        finally:
            give_back()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._idle.pop() if self._idle else ThreadPoolExecutor(1, thread_name_prefix="airlock-request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            # A request cancelled while its sync code still runs returns a busy thread: the next borrower
            # queues behind it, as it would behind any request on a single-thread executor.
            if len(self._idle) < IDLE_THREADS_KEPT:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)


def tune_garbage_collection() -> None:
    """Call once the app is loaded: what exists now lives as long as the process, so full collections
    stop walking it (gc.freeze), and young collections run less often."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
