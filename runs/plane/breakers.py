"""Circuit breakers keyed by failure domain, shared across processes through the Django cache.

closed → open after `threshold` failures within `window_s` → after `open_s`, half-open: exactly one
probe (claimed with an atomic `cache.add`) → closed on success, open again on failure. Every
state change is claimed atomically too (`add`/`delete` return whether *this* caller changed it),
so one process reports each transition even when many share the breaker. With Redis as the cache
these are SET NX / INCR / DEL.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from lib import clock
from lib.endpoints import endpoint_of
from runs.errors import Unavailable

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
STATE_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Transition:
    domain: str
    from_state: str
    to_state: str
    detail: str


@dataclass(frozen=True)
class Admission:
    state: str
    probe: bool


def config() -> dict:
    return {
        "threshold": settings.AIRLOCK_BREAKER_FAILURE_THRESHOLD,
        "window_s": settings.AIRLOCK_BREAKER_WINDOW_SECONDS,
        "open_s": settings.AIRLOCK_BREAKER_OPEN_SECONDS,
        "probe_s": settings.AIRLOCK_BREAKER_PROBE_SECONDS,
    }


def domain_for(adapter_uri: str, *, tenant: str = "", tenant_specific: bool = False) -> str:
    """The failure domain: the endpoint the adapter talks to, and the tenant when its failures are its own."""
    endpoint = endpoint_of(adapter_uri)
    return f"{endpoint}|tenant={tenant}" if tenant_specific and tenant else endpoint


def _key(domain: str, part: str) -> str:
    return f"airlock:breaker:{domain}:{part}"


def state_of(domain: str) -> str:
    opened = cache.get(_key(domain, "open"))
    if opened is None:
        return CLOSED
    return OPEN if clock.time() < opened["until"] else HALF_OPEN


def snapshot(domain: str) -> dict:
    """State for pages and spans: state, failures in the current window, when it may probe."""
    opened = cache.get(_key(domain, "open"))
    failures = cache.get(_key(domain, "fails")) or 0
    if opened is None:
        return {"domain": domain, "state": CLOSED, "failures": failures}
    state = OPEN if clock.time() < opened["until"] else HALF_OPEN
    return {
        "domain": domain,
        "state": state,
        "failures": failures,
        "opened_at": opened["at"],
        "retry_at": opened["until"],
    }


def admit(domain: str) -> Admission:
    """Let a call through or fail fast with `unavailable` while the breaker is open."""
    opened = cache.get(_key(domain, "open"))
    if opened is None:
        return Admission(CLOSED, probe=False)
    now = clock.time()
    if now < opened["until"]:
        raise Unavailable(
            "The skill's service is failing; Airlock stopped sending it calls for a moment.",
            code="circuit_open",
            retry_after=max(1, round(opened["until"] - now)),
        )
    if cache.add(_key(domain, "probe"), now, timeout=config()["probe_s"]):
        return Admission(HALF_OPEN, probe=True)
    raise Unavailable(
        "The skill's service is recovering; one probe call is testing it.", code="circuit_half_open", retry_after=1
    )


def _open(domain: str, *, at: float) -> None:
    cache.set(_key(domain, "open"), {"at": at, "until": at + config()["open_s"]}, timeout=STATE_TTL_S)


def record_success(domain: str, admission: Admission) -> list[Transition]:
    if admission.state == CLOSED:
        return []
    cache.delete(_key(domain, "probe"))
    cache.delete(_key(domain, "fails"))
    if cache.delete(_key(domain, "open")):
        return [Transition(domain, HALF_OPEN, CLOSED, "probe call succeeded")]
    return []


def record_failure(domain: str, admission: Admission, *, reason: str) -> list[Transition]:
    now = clock.time()
    if admission.probe:
        _open(domain, at=now)
        cache.delete(_key(domain, "probe"))
        return [Transition(domain, HALF_OPEN, OPEN, f"probe call failed: {reason}")]
    cfg = config()
    fails_key = _key(domain, "fails")
    cache.add(fails_key, 0, timeout=cfg["window_s"])
    try:
        failures = cache.incr(fails_key)
    except ValueError:  # the window expired between add and incr
        cache.add(fails_key, 1, timeout=cfg["window_s"])
        failures = 1
    if failures < cfg["threshold"]:
        return []
    if cache.add(_key(domain, "open"), {"at": now, "until": now + cfg["open_s"]}, timeout=STATE_TTL_S):
        cache.delete(fails_key)
        return [Transition(domain, CLOSED, OPEN, f"{failures} failures within {cfg['window_s']}s; last: {reason}")]
    return []
