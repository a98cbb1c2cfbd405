"""Settings for the gate benchmark's live server: the real settings, with rate limits out of the way
(the benchmark measures the gate, not the limiter's refusals)."""

from console.settings import *  # noqa: F403

AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE = 10**9
AIRLOCK_RATE_LIMITS: list = []  # no operator entry from the environment lowers them again
