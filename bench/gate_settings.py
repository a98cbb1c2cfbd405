"""Settings for the gate benchmark's live server: the real settings, with rate limits out of the way
(the benchmark measures the gate, not the limiter's refusals)."""

from console.settings import *  # noqa: F403

AIRLOCK_RATE_LIMITS = {"agent_per_minute": 10**9, "skill_per_minute": 10**9}
