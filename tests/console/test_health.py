"""GET /healthz: the database, and Redis and Celery workers when REDIS_URL is set."""

import socket

import pytest
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
