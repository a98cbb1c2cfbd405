"""One Redis client per URL per process, shared by the modules that talk to Redis directly.

Built under a lock, never by a bare `functools.cache`: two threads racing on first use would each build
a client, and the one that loses is garbage-collected and closes the connection pool it shares with the
pipelines taken from it ("Bad file descriptor" in another thread's `pipeline.execute()`).
"""

from __future__ import annotations

import threading

import redis

_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}


def shared(url: str) -> redis.Redis:
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url)
            if client is None:
                client = _clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return client


__all__ = ["shared"]
