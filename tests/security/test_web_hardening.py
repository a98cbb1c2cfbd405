"""CSRF on every console form, websocket origin check, session cookie flags, API key guessing
rate-limited, secrets absent from logs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import get_resolver, reverse
from rest_framework.test import APIClient

from tests.security.test_isolation_generated import _walk
from tests.security.world import EXEMPT, FILLERS, build_world

HTML_SKIP = ("django-admin/", "api/", "v1/", "healthz")


def _html_routes():
    return [
        (route, name, params)
        for route, name, params in _walk(get_resolver())
        if name and not route.startswith(HTML_SKIP) and name not in EXEMPT
    ]


HTML_ROUTES = _html_routes()


@pytest.fixture
def world(db):
    return build_world()


@pytest.mark.parametrize(("route", "name", "params"), HTML_ROUTES, ids=[r[1] for r in HTML_ROUTES])
def test_every_console_form_refuses_a_post_without_the_csrf_token(route, name, params, world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.acme_user)
    url = reverse(name, kwargs=FILLERS[params](world) if params else {})
    response = client.post(url, {"name": "x"})
    assert response.status_code == 403, f"POST {url} without a CSRF token answered {response.status_code}"


def test_the_approver_api_with_a_session_needs_the_csrf_token(world):
    from tests.approvals.factories import open_request

    approval = open_request(tenant=world.acme, agent=world.acme_agent)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.acme_user)
    url = reverse("approvals_api:approval_decision", kwargs={"approval_id": approval.pk})
    response = client.post(url, {"decision": "approve"}, format="json")
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("origin", ["http://evil.example", "null", ""])
async def test_websocket_refuses_a_foreign_origin(origin):
    from airlock.asgi import application

    world = await database_sync_to_async(build_world)()

    def cookie() -> str:
        client = Client()
        client.force_login(world.acme_user)
        return client.cookies[settings.SESSION_COOKIE_NAME].value

    session = await database_sync_to_async(cookie)()
    headers = [(b"host", b"testserver"), (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode())]
    if origin:
        headers.append((b"origin", origin.encode()))
    socket = WebsocketCommunicator(application, "/ws/approvals/", headers=headers)
    connected, _ = await socket.connect()
    assert not connected, f"a socket from origin {origin!r} was accepted"
    await socket.disconnect()


def test_session_and_csrf_cookies_carry_their_flags(world):
    response = Client().post(reverse("console:login"), {"username": world.acme_user.username, "password": "pw"})
    assert response.status_code == 302
    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    response = Client().get(reverse("console:login"))
    assert response.cookies[settings.CSRF_COOKIE_NAME]["samesite"] == "Lax"


def test_production_settings_make_cookies_secure(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "s" * 60,
        "ALLOWED_HOSTS": "airlock.example.com",
        "AIRLOCK_PUBLIC_URL": "https://airlock.example.com",
        "AIRLOCK_SIGNING_KEY": str(settings.VAR_DIR / "test_signing_key.pem"),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "REDIS_URL": "",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
    }
    for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT"):
        env.pop(name, None)
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; print(json.dumps(["
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY, s.SESSION_COOKIE_SAMESITE,"
        "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS > 0]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=settings.BASE_DIR, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    secure, csrf_secure, httponly, samesite, redirect, hsts = json.loads(done.stdout.strip().splitlines()[-1])
    assert (secure, csrf_secure, httponly, samesite, redirect, hsts) == (True, True, True, "Lax", True, True)


def test_guessing_api_keys_is_rate_limited(world, settings):
    settings.AIRLOCK_BAD_KEYS_PER_MINUTE = 10
    guesser = APIClient(REMOTE_ADDR="203.0.113.9")
    url = reverse("runs_api:run_create")
    statuses = []
    for i in range(15):
        guesser.credentials(HTTP_AUTHORIZATION=f"Bearer ak_{i:012d}_{'x' * 40}")
        statuses.append(guesser.post(url, {"end_user": "u"}, format="json").status_code)
    assert statuses[:10] == [401] * 10
    assert set(statuses[10:]) == {429}
    guesser.credentials(HTTP_AUTHORIZATION=f"Bearer ak_{99:012d}_{'x' * 40}")
    refused = guesser.post(url, {"end_user": "u"}, format="json")
    assert refused.status_code == 429
    assert refused.json()["error"]["class"] == "rate_limited"
    assert int(refused["Retry-After"]) > 0
    # The right key is never refused for the guessing (tests/console/test_key_guessing.py has more).
    guesser.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
    assert guesser.post(url, {"end_user": "u"}, format="json").status_code == 201
    # Another client is not affected.
    other = APIClient(REMOTE_ADDR="198.51.100.7")
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
    assert other.get(reverse("registry_api:snapshot-latest")).status_code in (200, 404)


def test_good_keys_are_never_counted(world, settings):
    settings.AIRLOCK_BAD_KEYS_PER_MINUTE = 3
    agent = APIClient(REMOTE_ADDR="203.0.113.10")
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
    for _ in range(10):
        assert agent.get(reverse("runs_api:tools")).status_code == 200


SECRETS = [
    "sk_live_51HqZ8SECRETvalue0001",
    "tok_card_4242424242424242",
    "hunter2-password-value",
    "AKIAIOSFODNN7EXAMPLE",
]


def test_secrets_never_reach_the_logs(world, caplog):
    """A run full of secrets in arguments and results, at DEBUG: no log record carries one."""
    from runs.adapters.python import register
    from tests.runs.factories import grant, make_skill

    @register("security.echo_secrets", effect="read")
    def echo(*, arguments, context):
        return {"api_key": SECRETS[0], "card": "4242 4242 4242 4242", "echo": arguments}

    schema = {
        "type": "object",
        "properties": {"password": {"type": "string"}, "card_token": {"type": "string"}, "note": {"type": "string"}},
        "additionalProperties": False,
    }
    make_skill("security.echo", adapter="python:security.echo_secrets", schema=schema, publish=False)
    make_skill(
        "security.refund",
        adapter="python:security.echo_secrets",
        schema=schema,
        effect="external",
        approval="required",
        publish=False,
    )
    grant(world.acme, "security.*")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="secrets in logs")
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
    arguments = {"password": SECRETS[2], "card_token": SECRETS[1], "note": f"my key is {SECRETS[3]}"}
    with caplog.at_level(logging.DEBUG):
        run = agent.post(
            reverse("runs_api:run_create"), {"end_user": "u", "task": f"use {SECRETS[0]}"}, format="json"
        ).json()
        calls = agent.post(
            reverse("runs_api:run_calls", kwargs={"run_id": run["run_id"]}),
            {
                "calls": [
                    {"call_id": "c1", "name": "security.echo", "arguments": arguments},
                    {"call_id": "c2", "name": "security.refund", "arguments": arguments},
                    {"call_id": "c3", "name": "security.echo", "arguments": {"password": 7}},
                ]
            },
            format="json",
        )
        assert calls.status_code == 200
        results = calls.json()["results"]
        assert [r["status"] for r in results] == ["ok", "approval_required", "error"]
        from approvals.models import ApprovalRequest
        from approvals.services import decide_approval

        decide_approval(
            approval=ApprovalRequest.objects.get(pk=results[1]["approval_id"]), user=world.acme_user, decision="approve"
        )
        # A failing request is logged too: its body must not be.
        APIClient().post(
            reverse("runs_api:run_create"),
            {"password": SECRETS[2]},
            format="json",
            HTTP_AUTHORIZATION=f"Bearer ak_{'0' * 12}_{SECRETS[2]}xxxxxxxxxxxx",
        )
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {getattr(r, 'args', '')}" for r in caplog.records)
    assert caplog.records, "nothing was logged at DEBUG: the test would prove nothing"
    for secret in SECRETS:
        assert secret not in text, f"{secret} reached the logs"
