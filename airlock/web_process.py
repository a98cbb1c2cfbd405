"""How a web worker process runs Django's HTTP handling: request threads reused, garbage collection tuned.

Django's own ASGI handler gives every request a new thread for its sync code (a fresh single-thread
executor per request) and lets the interpreter's collector run with its defaults. Under the gate's load
both cost more than the request itself: starting a thread per request, and full collections that walk
every object the project imported (150 ms each, several times a minute, pausing every request in flight).
"""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

IDLE_THREADS_KEPT = 64
# Young objects between collections. The interpreter's 700 collects every few requests; at this size a
# request's short-lived cycles still die young, and a collection stays near a millisecond.
YOUNG_GENERATION_THRESHOLD = 50_000


class PooledThreadsASGIHandler(ASGIHandler):
    """Django's ASGI handler with each request's sync code on a thread borrowed for that request.

    As in Django's, a request's sync middleware and view run on one thread of their own, so a request
    waiting on a slow tool holds up no other. The threads are reused instead of started per request."""

    def __init__(self) -> None:
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []  # touched only from the worker's event loop

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
