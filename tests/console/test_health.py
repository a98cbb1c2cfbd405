"""GET /healthz: the database and its connection budget, and Redis and Celery workers when REDIS_URL is set."""

import socket

import pytest
from django.db import connection
from django.urls import reverse

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_embedded_mode_is_healthy_with_the_database(client, settings):
    settings.REDIS_URL = ""
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["redis"]["status"] == "not_configured"
    assert body["checks"]["celery"]["status"] == "eager"
    assert response["Cache-Control"] == "no-store"
    if connection.vendor == "sqlite":
        assert body["checks"]["connections"]["status"] == "not_configured"


def test_health_answers_probes_that_use_an_unknown_host_over_plain_http(client, settings):
    settings.REDIS_URL = ""
    settings.ALLOWED_HOSTS = ["airlock.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    response = client.get(reverse("healthz"), HTTP_HOST="10.0.0.7:8000")
    assert response.status_code == 200


def test_unreachable_redis_is_503_and_names_it(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["redis"]["status"] == "down"
    assert "connect" in body["checks"]["redis"]["error"].lower()
    assert body["checks"]["celery"]["status"] == "down"


def test_health_is_read_only(client):
    assert client.post(reverse("healthz")).status_code == 405


@pytest.mark.redis
def test_real_redis_without_a_worker_is_503_saying_so(client, settings):
    from console.celery import app

    app.conf.broker_url = settings.REDIS_URL  # the test session may have started in eager mode
    response = client.get(reverse("healthz"))
    body = response.json()
    assert body["checks"]["redis"]["status"] == "ok"
    assert body["checks"]["celery"]["status"] == "down"
    assert "no Celery worker answered" in body["checks"]["celery"]["error"]
    assert response.status_code == 503


def server_max_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        return int(cursor.fetchone()[0])


def available_connections() -> int:
    """What PostgreSQL lets ordinary roles have: max_connections less the reserved slots (PostgreSQL 16
    added reserved_connections beside superuser_reserved_connections)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true)::int, 0)"
        )
        return server_max_connections() - cursor.fetchone()[0]


@pytest.mark.postgres
def test_scaling_processes_past_max_connections_is_a_warning_not_an_outage(client, settings):
    """An operator adds Celery children (or web workers) without resizing the pools: every process still
    serves, so the probe must not restart them, but /healthz says, with the figures, that the pools together
    may ask PostgreSQL for more connections than it will give."""
    settings.REDIS_URL = ""
    pool_max_size = connection.settings_dict["OPTIONS"]["pool"]["max_size"]
    settings.AIRLOCK_DB_PROCESSES = available_connections() // pool_max_size + 1
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    check = body["checks"]["connections"]
    assert check["status"] == "warning"
    assert check["max_connections"] == server_max_connections()  # read from the server, not assumed
    assert check["most_held"] == settings.AIRLOCK_DB_PROCESSES * pool_max_size > available_connections()
    assert "AIRLOCK_DB_PROCESSES" in check["warning"] and "pool_max_size" in check["warning"]
    assert f"may hold {check['most_held']} connections" in check["warning"]


@pytest.mark.postgres
def test_pools_that_fit_max_connections_exactly_give_no_warning(client, settings):
    settings.REDIS_URL = ""
    pool = connection.settings_dict["OPTIONS"]["pool"]
    settings.AIRLOCK_DB_PROCESSES = available_connections() // pool["max_size"]
    check = client.get(reverse("healthz")).json()["checks"]["connections"]
    assert check["status"] == "ok" and "warning" not in check
    assert check["processes"] == settings.AIRLOCK_DB_PROCESSES
    assert check["pool_min_size"] == pool["min_size"]
    assert check["held_while_idle"] == pool["min_size"] * settings.AIRLOCK_DB_PROCESSES
