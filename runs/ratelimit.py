"""Fixed-window rate limits per agent and per tenant and skill, one cache round trip per check.

With REDIS_URL each check is one Lua command (INCR, and EXPIRE on a window's first hit) on a shared
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


# INCR, and the TTL on a window's first hit, as one atomic command (EVALSHA after the first call).
COUNT_HIT = """
local hits = redis.call('INCR', KEYS[1])
if hits == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return hits
"""


@functools.cache
def _count_hit(url: str) -> redis.commands.core.Script:
    return redis_clients.shared(url).register_script(COUNT_HIT)


def _count(key: str) -> int:
    """Count one hit under `key`; the hits so far, this one included."""
    if settings.REDIS_URL:
        return int(_count_hit(settings.REDIS_URL)(keys=[key], args=[KEY_TTL_S]))
    if cache.add(key, 1, timeout=KEY_TTL_S):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=KEY_TTL_S)
        return 1


def _hit(key: str, limit: int) -> int | None:
    """Count one hit in the current window; the seconds until the window resets when over the limit."""
    now = clock.time()
    window = int(now // WINDOW_S)
    if _count(f"airlock:rl:{key}:{window}") <= limit:
        return None
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


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


def check_agent(agent_id: int) -> None:
    limit = settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE
    wait = _hit(f"agent:{agent_id}", limit)
    if wait is not None:
        raise RateLimited(
            f"This agent made more than {limit} calls this minute.", code="agent_rate_limited", retry_after=wait
        )


def check_skill(skill_name: str, manifest: dict, *, tenant_id: int, tenant_slug: str) -> None:
    limit = skill_limit(skill_name, manifest, tenant_slug=tenant_slug)
    wait = _hit(f"skill:{tenant_id}:{skill_name}", limit)
    if wait is not None:
        raise RateLimited(
            f"{skill_name} is limited to {limit} calls a minute for this tenant.",
            code="skill_rate_limited",
            retry_after=wait,
        )
