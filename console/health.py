"""Health of the services Airlock depends on, for /healthz and operators."""

import time

from django.conf import settings
from django.db import connection


def _timed(check) -> dict:
    started = time.perf_counter()
    try:
        detail = check()
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
    from console.celery import app

    replies = app.control.ping(timeout=1.0) or []
    if not replies:
        raise RuntimeError("no Celery worker answered within 1 s")
    return {"workers": sorted(name for reply in replies for name in reply)}


def check_all() -> dict:
    checks = {"database": _timed(_database)}
    if settings.REDIS_URL:
        checks["redis"] = _timed(_redis)
        checks["celery"] = _timed(_celery_workers)
    else:
        checks["redis"] = {"status": "not_configured"}
        checks["celery"] = {"status": "eager", "detail": "tasks run in the web process (REDIS_URL unset)"}
    healthy = all(check["status"] in {"ok", "not_configured", "eager"} for check in checks.values())
    return {"status": "ok" if healthy else "degraded", "checks": checks}
