"""Wake-ups: "something under this topic was committed, read it again", from any process to async waiters.

A waiter (the run-events long poll) starts `listening(topic)` before it reads the database, and between
reads sleeps until a wake-up or its deadline, whichever is first. Writers `publish_on_commit(topic)`.
With REDIS_URL a wake-up crosses processes by Redis pub/sub: every topic on one channel, named with the
channel layer's prefix, heard by one subscriber thread per process that wakes that process's waiters.
Without it, only waiters in the publishing process hear it (the embedded mode, where tasks run eagerly
in the web process).

A wake-up is a hint, never the data. It can be lost (Redis restarts, a publish fails), so a waiter also
reads again every `fallback_seconds()`, and the subscriber wakes every waiter each time it (re)connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.db import transaction

from lib import clock, redis_clients

logger = logging.getLogger(__name__)

FALLBACK_WITH_REDIS_S = 5.0  # only a lost wake-up waits this long
FALLBACK_WITHOUT_REDIS_S = 0.25  # no cross-process wake-ups: read this often
RECONNECT_S = 1.0
HEARTBEAT_S = 10.0  # the subscriber pings an idle connection this often, so a dead one is noticed

_lock = threading.Lock()
_waiters: dict[str, set[Waiter]] = defaultdict(set)
_subscriber: _Subscriber | None = None


def fallback_seconds() -> float:
    return FALLBACK_WITH_REDIS_S if settings.REDIS_URL else FALLBACK_WITHOUT_REDIS_S


def _channel() -> str:
    """Pub/sub channels are server-wide, not per database: the name carries the db and the prefix."""
    prefix = (settings.CHANNEL_LAYERS.get("default", {}).get("CONFIG") or {}).get("prefix", "airlock")
    db = _publisher(settings.REDIS_URL).connection_pool.connection_kwargs.get("db", 0)
    return f"{prefix}:{db}:wakeups"


def _publisher(url: str) -> redis.Redis:
    return redis_clients.shared(url)


class Waiter:
    """One coroutine's interest in a topic; woken from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._woken = asyncio.Event()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its event loop has closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._woken.set)

    async def wait(self, seconds: float) -> bool:
        """Until a wake-up (one that came since the last wait counts) or `seconds` on lib.clock; True if woken."""
        if not self._woken.is_set():
            woken = asyncio.ensure_future(self._woken.wait())
            slept = asyncio.ensure_future(clock.asleep(seconds))
            try:
                await asyncio.wait({woken, slept}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
                slept.cancel()
        was_woken = self._woken.is_set()
        self._woken.clear()
        return was_woken


@contextmanager
def listening(topic: str) -> Iterator[Waiter]:
    """Hear wake-ups for `topic` while inside; enter before the first read, so none falls in between."""
    waiter = Waiter(asyncio.get_running_loop())
    if settings.REDIS_URL:
        _ensure_subscriber(settings.REDIS_URL)
    with _lock:
        _waiters[topic].add(waiter)
    try:
        yield waiter
    finally:
        with _lock:
            _waiters[topic].discard(waiter)
            if not _waiters[topic]:
                del _waiters[topic]


def _wake_local(topic: str | None) -> None:
    """Wake this process's waiters on `topic`, or all of them (None)."""
    with _lock:
        woken = list(_waiters.get(topic, ())) if topic is not None else [w for ws in _waiters.values() for w in ws]
    for waiter in woken:
        waiter.wake()


def publish(topic: str) -> None:
    """Wake the waiters on `topic` in every process now (call it once the data is committed)."""
    if settings.REDIS_URL:
        try:
            _publisher(settings.REDIS_URL).publish(_channel(), topic)
            return
        except redis.RedisError:
            logger.warning(
                "could not publish a wake-up for %s; waiters read again within %gs",
                topic,
                fallback_seconds(),
                exc_info=True,
            )
    _wake_local(topic)


def publish_on_commit(topic: str) -> None:
    transaction.on_commit(lambda: publish(topic), robust=True)


class _Subscriber(threading.Thread):
    """This process's one subscription: each message wakes the waiters on its topic."""

    def __init__(self, url: str, channel: str) -> None:
        super().__init__(name="airlock-wakeups", daemon=True)
        self.url, self.channel, self.pid = url, channel, os.getpid()

    def run(self) -> None:
        while True:
            try:
                self._listen()
            except Exception:  # noqa: BLE001 - Redis went away: wake everyone (they read again), reconnect
                logger.warning("wake-up subscription lost; reconnecting", exc_info=True)
            _wake_local(None)
            time.sleep(RECONNECT_S)

    def _listen(self) -> None:
        client = redis.Redis.from_url(
            self.url, socket_connect_timeout=2, health_check_interval=HEARTBEAT_S, client_name=subscriber_name(self.pid)
        )
        with client.pubsub(ignore_subscribe_messages=False) as pubsub:
            pubsub.subscribe(self.channel)
            while True:
                message = pubsub.get_message(timeout=HEARTBEAT_S)
                if message is None:
                    continue
                if message["type"] == "subscribe":  # (re)connected: anything may have been missed meanwhile
                    _wake_local(None)
                elif message["type"] == "message":
                    _wake_local(message["data"].decode())


def subscriber_name(pid: int) -> str:
    """The Redis client name of a process's subscription (CLIENT LIST shows it)."""
    return f"airlock-wakeups-{pid}"


def _ensure_subscriber(url: str) -> None:
    global _subscriber
    with _lock:
        if _subscriber is None or not _subscriber.is_alive():
            _subscriber = _Subscriber(url, _channel())
            _subscriber.start()


def _forget_parents_state() -> None:
    """A forked child has none of its parent's threads or coroutines: not its subscriber, not its
    waiters, and a lock the subscriber may have held at the fork would never be released."""
    global _lock, _waiters, _subscriber
    _lock, _waiters, _subscriber = threading.Lock(), defaultdict(set), None


os.register_at_fork(after_in_child=_forget_parents_state)
