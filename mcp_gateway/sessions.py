"""Airlock's MCP sessions, kept where every process sees them, so that any process continues any session.

The SDK serves each request on its own (stateless mode); Airlock issues the Mcp-Session-Id when a client
initializes and keeps, under it, in the cache (Redis in a deployment; the embedded mode is one process and
uses its memory): the agent that opened the session, the session's run, the tool names last listed to it
and its call counter. A session ends on DELETE or after SESSION_IDLE_S without a request.

A session's writes take its turn, one at a time across every process (a Redis lock, which a dead process's
turn outlives by at most TURN_HOLD_S); the process's own lock first, so that its waiting calls go in
arrival order.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from uuid import UUID

import redis.asyncio
from django.conf import settings
from django.core.cache import cache

SESSION_IDLE_S = 30 * 60  # the SDK's own default for its in-process sessions
TURN_HOLD_S = 10 * 60  # a turn held longer than any call runs is a dead process's: the next write may go
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")  # what new_session_id() issues: 256 random bits

_local_turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
_redis_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Session:
    """One MCP session as a request finds it."""

    session_id: str
    agent_id: int
    run_id: UUID | None
    listed: list[str] | None  # the tool names last listed to this session: what its model was shown


def _key(session_id: str, part: str) -> str:
    return f"airlock:mcp:{session_id}:{part}"


def open_session(*, agent_id: int) -> str:
    """A new session of this agent; its id is unguessable."""
    session_id = secrets.token_urlsafe(32)
    cache.set_many({_key(session_id, "agent"): agent_id, _key(session_id, "calls"): 0}, timeout=SESSION_IDLE_S)
    return session_id


def session_for(*, session_id: str, agent_id: int) -> Session | None:
    """The session, its expiry pushed back; None for an unknown or expired id and for another agent's
    session (answered alike: whether an id exists is nobody else's business)."""
    if not SESSION_ID.fullmatch(session_id):
        return None
    parts = ("agent", "run", "listed", "calls")
    found = cache.get_many([_key(session_id, part) for part in parts])
    if found.get(_key(session_id, "agent")) != agent_id:
        return None
    for part in parts:
        cache.touch(_key(session_id, part), SESSION_IDLE_S)
    run_id = found.get(_key(session_id, "run"))
    return Session(session_id, agent_id, UUID(run_id) if run_id else None, found.get(_key(session_id, "listed")))


def close_session(*, session_id: str) -> None:
    cache.delete_many([_key(session_id, part) for part in ("agent", "run", "listed", "calls")])


def run_of(*, session_id: str) -> UUID | None:
    run_id = cache.get(_key(session_id, "run"))
    return UUID(run_id) if run_id else None


def set_run(*, session_id: str, run_id: UUID) -> None:
    cache.set(_key(session_id, "run"), str(run_id), timeout=SESSION_IDLE_S)


def remember_listed(*, session_id: str, names: list[str]) -> None:
    cache.set(_key(session_id, "listed"), names, timeout=SESSION_IDLE_S)


def next_call_number(*, session_id: str) -> int:
    """1, 2, 3, … for the session's calls, whichever process serves them."""
    try:
        return cache.incr(_key(session_id, "calls"))
    except ValueError:  # expired between the request's lookup and here
        cache.add(_key(session_id, "calls"), 0, timeout=SESSION_IDLE_S)
        return cache.incr(_key(session_id, "calls"))


def _redis() -> redis.asyncio.Redis:
    loop = asyncio.get_running_loop()
    client = _redis_by_loop.get(loop)
    if client is None:
        client = _redis_by_loop[loop] = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
    return client


@asynccontextmanager
async def turn(session_id: str, purpose: str) -> AsyncIterator[None]:
    """The session's turn for `purpose` (its writes; opening its run), held by one request of every process."""
    name = _key(session_id, f"turn:{purpose}")
    local = _local_turns.get(name)
    if local is None:
        local = _local_turns[name] = asyncio.Lock()
    async with local:  # asyncio locks are fair: this process's waiting calls go in arrival order
        if not settings.REDIS_URL:
            yield
            return
        async with _redis().lock(name, timeout=TURN_HOLD_S, sleep=0.02, blocking_timeout=TURN_HOLD_S):
            yield
