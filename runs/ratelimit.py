"""Fixed-window rate limits per agent and per tenant and skill, one cache round trip per call.

A call that reaches authorization is checked against both limits at once (`check_call`); one that
fails before (unknown name, invalid arguments, denied) still counts against its agent (`check_agent`), and
so does each call of an upload of calls the SDK decided locally (`check_agent(agent_id, calls=n)`: the
upload is refused whole while the agent's minute is used up, runs.local_calls).
With REDIS_URL each check is one Lua command (INCRBY, and EXPIRE on a window's first hits) on a shared
client of its own: Django's RedisCache has no public atomic increment-or-create (its `incr` is an EXISTS
and an INCRBY, after an `add`). The embedded mode counts in the process's local-memory cache instead.

A skill's limit for a tenant is the operator's (AIRLOCK_RATE_LIMITS), else the skill owner's (the manifest's
`execution.rate_limit_per_minute`), else AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE. Of the operator's entries
that apply, the most specific skill wins (its own name, then the longest namespace, then `*`), and of
two as specific, the one naming the tenant beats `*`: so a tenant-wide entry never lifts a limit the
operator set on one skill for everyone.
"""

from __future__ import annotations

import functools
import math

import redis
from django.conf import settings
from django.core.cache import cache

from lib import clock, redis_clients
from policies.models import pattern_covers
from runs.errors import RateLimited

WINDOW_S = 60
KEY_TTL_S = WINDOW_S + 5  # outlives its window, whatever the clock skew between processes


# INCRBY, and the TTL on a window's first hits, as one atomic command (EVALSHA after the first call).
COUNT_HIT = """
local hits = redis.call('INCRBY', KEYS[1], ARGV[2])
if hits == tonumber(ARGV[2]) then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return hits
"""


# The agent's hit, then the skill's only if the agent is within its limit (an agent over its limit uses
# none of the tenant's budget for the skill): {agent hits, skill hits or 0}.
COUNT_CALL = """
local agent = redis.call('INCR', KEYS[1])
if agent == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
if agent > tonumber(ARGV[2]) then return {agent, 0} end
local skill = redis.call('INCR', KEYS[2])
if skill == 1 then redis.call('EXPIRE', KEYS[2], ARGV[1]) end
return {agent, skill}
"""


@functools.cache
def _count_hit(url: str) -> redis.commands.core.Script:
    return redis_clients.shared(url).register_script(COUNT_HIT)


@functools.cache
def _count_call(url: str) -> redis.commands.core.Script:
    return redis_clients.shared(url).register_script(COUNT_CALL)


def _count(key: str, hits: int = 1) -> int:
    """Count `hits` under `key`; the hits so far, these included."""
    if settings.REDIS_URL:
        return int(_count_hit(settings.REDIS_URL)(keys=[key], args=[KEY_TTL_S, hits]))
    if cache.add(key, hits, timeout=KEY_TTL_S):
        return hits
    try:
        return cache.incr(key, hits)
    except ValueError:  # expired between add and incr
        cache.add(key, hits, timeout=KEY_TTL_S)
        return hits


def _window_key(key: str, window: int) -> str:
    return f"airlock:rl:{key}:{window}"


def _retry_after(now: float, window: int) -> int:
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


def _hit(key: str, limit: int, hits: int = 1) -> int | None:
    """Count `hits` in the current window; the seconds until the window resets when the window already held
    `limit` hits before these (for one hit: when it is over the limit)."""
    now = clock.time()
    window = int(now // WINDOW_S)
    if _count(_window_key(key, window), hits) - hits < limit:
        return None
    return _retry_after(now, window)


def skill_limit(skill_name: str, manifest: dict, *, tenant_slug: str) -> int:
    """Calls a minute one tenant's agents together may make of this skill (precedence: module docstring)."""
    best_rank, best_limit = None, None
    for tenant, pattern, per_minute in settings.AIRLOCK_RATE_LIMITS:
        if tenant in (tenant_slug, "*") and pattern_covers(pattern, skill_name):
            rank = ("*" not in pattern, len(pattern), tenant != "*")
            if best_rank is None or rank > best_rank:
                best_rank, best_limit = rank, per_minute
    if best_limit is not None:
        return best_limit
    return manifest.get("execution", {}).get("rate_limit_per_minute") or settings.AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE


def _agent_limited(limit: int, wait: int) -> RateLimited:
    return RateLimited(
        f"This agent made more than {limit} calls this minute.", code="agent_rate_limited", retry_after=wait
    )


def _skill_limited(skill_name: str, limit: int, wait: int) -> RateLimited:
    return RateLimited(
        f"{skill_name} is limited to {limit} calls a minute for this tenant.",
        code="skill_rate_limited",
        retry_after=wait,
    )


def check_agent(agent_id: int, calls: int = 1) -> None:
    """Count `calls` of the agent (an upload of locally decided calls counts them all at once: runs.local_calls);
    refused when the agent's minute was already used up before them. A refused batch still counts."""
    limit = settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE
    wait = _hit(f"agent:{agent_id}", limit, calls)
    if wait is not None:
        raise _agent_limited(limit, wait)


def check_skill(skill_name: str, manifest: dict, *, tenant_id: int, tenant_slug: str) -> None:
    limit = skill_limit(skill_name, manifest, tenant_slug=tenant_slug)
    wait = _hit(f"skill:{tenant_id}:{skill_name}", limit)
    if wait is not None:
        raise _skill_limited(skill_name, limit, wait)


def check_call(agent_id: int, skill_name: str, manifest: dict, *, tenant_id: int, tenant_slug: str) -> None:
    """check_agent, then check_skill if the agent is within its limit: with Redis, one round trip."""
    if not settings.REDIS_URL:
        check_agent(agent_id)
        check_skill(skill_name, manifest, tenant_id=tenant_id, tenant_slug=tenant_slug)
        return
    agent_limit = settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE
    skill_limit_ = skill_limit(skill_name, manifest, tenant_slug=tenant_slug)
    now = clock.time()
    window = int(now // WINDOW_S)
    keys = [_window_key(f"agent:{agent_id}", window), _window_key(f"skill:{tenant_id}:{skill_name}", window)]
    agent_hits, skill_hits = _count_call(settings.REDIS_URL)(keys=keys, args=[KEY_TTL_S, agent_limit])
    if int(agent_hits) > agent_limit:
        raise _agent_limited(agent_limit, _retry_after(now, window))
    if int(skill_hits) > skill_limit_:
        raise _skill_limited(skill_name, skill_limit_, _retry_after(now, window))
