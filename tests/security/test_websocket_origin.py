"""The websocket origin check, attacked: an origin that differs from the server's in scheme, host or port
is refused on the real ASGI application, with a valid session; only the exact origin (or a configured
CSRF_TRUSTED_ORIGINS entry) is let in."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def _connects(
    user, origin: str | None, host: str = "testserver", extra: list | None = None, scheme: str | None = None
) -> bool:
    from airlock.asgi import application

    session = await database_sync_to_async(_cookie)(user)
    headers = [
        (b"host", host.encode()),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode()),
        *(extra or []),
    ]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    socket = WebsocketCommunicator(application, "/ws/approvals/", headers=headers)
    if scheme:
        socket.scope["scheme"] = scheme
    connected, _ = await socket.connect()
    await socket.disconnect()
    return connected


@pytest.mark.parametrize(
    "origin",
    [
        "http://testserver:9999",  # another port on the same host
        "https://testserver",  # another scheme: the server here is http
        "http://evil.example",  # another host
        "http://testserver.evil.example",
        "http://evil.example#testserver",
        "ws://testserver",
        "null",
        "",
    ],
)
async def test_a_socket_from_any_other_origin_is_refused(approver, origin):
    assert not await _connects(approver, origin), f"a socket from {origin!r} was accepted"


async def test_the_exact_origin_is_accepted(approver):
    assert await _connects(approver, "http://testserver")
    assert await _connects(approver, "http://TestServer")  # host names are case-insensitive
    assert await _connects(approver, "http://testserver:8000", host="testserver:8000")


async def test_no_origin_at_all_is_refused(approver):
    assert not await _connects(approver, None)


async def test_a_forged_host_header_does_not_make_an_origin_ours(approver):
    """An attacker's page controls neither the Host header nor ALLOWED_HOSTS; both must agree."""
    assert not await _connects(approver, "http://evil.example", host="evil.example")


async def test_behind_tls_only_the_https_origin_is_ours(approver, settings):
    assert await _connects(approver, "https://testserver", scheme="wss")
    assert not await _connects(approver, "http://testserver", scheme="wss")
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    forwarded = [(b"x-forwarded-proto", b"https")]
    assert await _connects(approver, "https://testserver", extra=forwarded)
    assert not await _connects(approver, "http://testserver", extra=forwarded)


async def test_csrf_trusted_origins_are_matched_exactly(approver, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example", "https://*.corp.example"]
    assert await _connects(approver, "https://console.example")
    assert await _connects(approver, "https://airlock.corp.example")
    assert not await _connects(approver, "http://console.example")
    assert not await _connects(approver, "https://console.example:8443")
    assert not await _connects(approver, "https://console.example.evil.example")
    assert not await _connects(approver, "https://corp.example.evil.example")
