"""Fixed-window rate limits per agent and per skill, counted in the Django cache (Redis when configured)."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache

from runs.errors import RateLimited

WINDOW_S = 60


def _limits() -> dict:
    return {
        "agent_per_minute": settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE,
        "skill_per_minute": settings.AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE,
    }


def _hit(key: str, limit: int) -> int | None:
    """Count one hit; the seconds to wait when over the limit, else None."""
    now = time.time()
    window = int(now // WINDOW_S)
    cache_key = f"airlock:rl:{key}:{window}"
    if cache.add(cache_key, 1, timeout=WINDOW_S + 5):
        count = 1
    else:
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add and incr
            cache.add(cache_key, 1, timeout=WINDOW_S + 5)
            count = 1
    if count > limit:
        return max(1, int((window + 1) * WINDOW_S - now) + 1)
    return None


def check_agent(agent_id: int) -> None:
    wait = _hit(f"agent:{agent_id}", _limits()["agent_per_minute"])
    if wait is not None:
        raise RateLimited(
            f"This agent made more than {_limits()['agent_per_minute']} calls this minute.",
            code="agent_rate_limited",
            retry_after=wait,
        )


def check_skill(skill_name: str, manifest: dict) -> None:
    limit = manifest.get("execution", {}).get("rate_limit_per_minute") or _limits()["skill_per_minute"]
    wait = _hit(f"skill:{skill_name}", limit)
    if wait is not None:
        raise RateLimited(
            f"{skill_name} is limited to {limit} calls a minute.", code="skill_rate_limited", retry_after=wait
        )
