"""Health of the services Airlock depends on, for /healthz and operators.

The report is `{"status": "ok" | "degraded", "checks": {"database", "redis", "celery"}}`; each
check has a `status` of `ok`, `down`, `not_configured` (no REDIS_URL) or `eager` (tasks run in
the web process). Anything `down` makes the whole report `degraded` and the response 503: with
REDIS_URL set and no Celery worker answering, approved calls would never resume, so that counts.
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
