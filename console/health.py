"""Health of the services Airlock depends on, for /healthz and operators.

The report is `{"status": "ok" | "degraded", "checks": {"database", "connections", "redis", "celery"}}`;
each check has a `status` of `ok`, `down`, `not_configured` (no REDIS_URL; no connection pool) or
`eager` (tasks run in the web process). Anything `down` makes the whole report `degraded` and the
response 503: with REDIS_URL set and no Celery worker answering, approved calls would never resume, so
that counts. `connections` is only ever `ok`, `warning` or `unknown`, never `down`: the deployment's
pools could outgrow PostgreSQL's max_connections, but this process is serving, and a probe that
restarted it would not fix the sizing.
"""

import json
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse

from console.celery import app

HEALTH_PATH = "/healthz"
CELERY_PING_TIMEOUT = 1.0


class CheckFailed(Exception):
    """A dependency answered, but not well: the message is shown to operators as is."""


def _timed(check: Callable[[], dict | None]) -> dict:
    started = time.perf_counter()
    try:
        detail = check()
    except CheckFailed as exc:
        return {"status": "down", "error": str(exc)}
    except Exception as exc:  # a health check reports failures, it never raises
        return {"status": "down", "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "ok", "latency_ms": round((time.perf_counter() - started) * 1000, 2), **(detail or {})}


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"engine": connection.vendor}


def _connections() -> dict:
    """The most connections the deployment's pools may hold (AIRLOCK_DB_PROCESSES x this process's pool
    max_size) against what PostgreSQL lets them have: max_connections less the slots it keeps for
    superusers (and, from PostgreSQL 16, for pg_use_reserved_connections)."""
    pool = connection.settings_dict["OPTIONS"].get("pool")
    if connection.vendor != "postgresql" or not isinstance(pool, dict):
        return {"status": "not_configured", "detail": "no connection pool (SQLite, pool=off or conn_max_age)"}
    processes = settings.AIRLOCK_DB_PROCESSES
    ceiling = pool["max_size"] * processes
    try:
        server = _server_connection_settings()
    except Exception as exc:  # this check warns, it never fails the report
        return {"status": "unknown", "error": f"{type(exc).__name__}: {exc}"[:300]}
    reserved = server.get("superuser_reserved_connections", 0) + server.get("reserved_connections", 0)
    available = server["max_connections"] - reserved
    figures = {
        "processes": processes,
        "pool_max_size": pool["max_size"],
        "pool_min_size": pool["min_size"],
        "most_held": ceiling,
        "held_while_idle": pool["min_size"] * processes,
        "max_connections": server["max_connections"],
        "reserved": reserved,
    }
    if ceiling <= available:
        return {"status": "ok", **figures}
    warning = (
        f"{processes} processes (AIRLOCK_DB_PROCESSES) x a pool of {pool['max_size']} may hold {ceiling} "
        f"connections, more than the {available} PostgreSQL allows ({server['max_connections']} "
        f"max_connections, {reserved} reserved): requests will wait for a connection or fail with "
        "'too many clients'. Lower DATABASE_URL's ?pool_max_size=N, run fewer processes or raise max_connections."
    )
    return {"status": "warning", "warning": warning, **figures}


def _server_connection_settings() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN "
            "('max_connections', 'superuser_reserved_connections', 'reserved_connections')"
        )
        return {name: int(setting) for name, setting in cursor.fetchall()}


def _redis() -> dict:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return {}


def _celery_workers() -> dict:
    replies = app.control.ping(timeout=CELERY_PING_TIMEOUT) or []
    if not replies:
        raise CheckFailed(
            f"no Celery worker answered within {CELERY_PING_TIMEOUT:g} s; start one "
            "(celery -A console worker) or approved calls will not resume"
        )
    return {"workers": sorted(name for reply in replies for name in reply)}


def check_all() -> dict[str, Any]:
    checks = {"database": _timed(_database)}
    if checks["database"]["status"] == "ok":
        checks["connections"] = _connections()
    else:
        checks["connections"] = {"status": "unknown", "error": "the database is unreachable"}
    if settings.REDIS_URL:
        checks["redis"] = _timed(_redis)
        if checks["redis"]["status"] == "ok":
            checks["celery"] = _timed(_celery_workers)
        else:
            # The broker is Redis: asking workers through it would only wait for the timeout.
            checks["celery"] = {"status": "down", "error": "unknown: the broker (Redis) is unreachable"}
    else:
        checks["redis"] = {"status": "not_configured"}
        checks["celery"] = {"status": "eager", "detail": "tasks run in the web process (REDIS_URL unset)"}
    healthy = all(check["status"] != "down" for check in checks.values())
    return {"status": "ok" if healthy else "degraded", "checks": checks}


def health_response() -> HttpResponse:
    report = check_all()
    return HttpResponse(
        json.dumps(report),
        status=200 if report["status"] == "ok" else 503,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


class HealthCheckMiddleware:
    """Answer GET /healthz before host validation and the HTTPS redirect.

    Load balancers and container probes call it by IP over plain HTTP; in production both
    ALLOWED_HOSTS and SECURE_SSL_REDIRECT would otherwise turn them away.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == HEALTH_PATH and request.method in {"GET", "HEAD"}:
            return health_response()
        return self.get_response(request)
