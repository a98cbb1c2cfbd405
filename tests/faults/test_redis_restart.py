"""Redis restarted while approvers are connected. Uses its OWN redis-server on a free port (never
the shared one). While Redis is down, requests are still opened (the database is the record; the
websocket hint is lost); after the restart an inbox that reconnects hears new requests again, and
the re-read (the approver API's pending list) returns every pending request, including the one
whose hint was lost."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from console.env import channel_layer_from_url
from tests.approvals.factories import open_request
from tests.own_redis import REDIS_SERVER, OwnRedis

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_redis(settings):
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    redis = OwnRedis()
    redis.start()
    url = redis.url
    settings.CHANNEL_LAYERS = {"default": channel_layer_from_url(url, prefix="airlock-faults")}
    channel_layers.backends.clear()
    yield redis
    redis.stop()
    channel_layers.backends.clear()


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


async def _inbox(user) -> WebsocketCommunicator:
    from airlock.asgi import application

    cookie = await database_sync_to_async(_cookie)(user)
    socket_ = WebsocketCommunicator(
        application,
        "/ws/approvals/",
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        ],
    )
    connected, _ = await socket_.connect(timeout=5)
    assert connected
    return socket_


async def _reconnect(user, attempts: int = 5) -> WebsocketCommunicator:
    """The first attempt after the restart may meet a pooled connection to the old server; the
    layer drops it, and a later attempt succeeds."""
    for attempt in range(attempts):
        try:
            return await _inbox(user)
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


async def test_inboxes_recover_and_catch_up_after_a_redis_restart(own_redis, acme, agent, approver):
    inbox = await _inbox(approver)
    before = await database_sync_to_async(open_request)(tenant=acme, agent=agent)
    assert (await inbox.receive_json_from(timeout=5))["approval_id"] == before.pk

    own_redis.stop()
    during = await database_sync_to_async(open_request)(tenant=acme, agent=agent)  # no hint can be sent
    assert during.pk and during.status == "pending"  # the request itself is never lost
    with contextlib.suppress(Exception):  # the socket dies with Redis; leaving its groups cannot work now
        await inbox.disconnect()

    own_redis.start()  # same port, empty: every group membership is gone
    await asyncio.sleep(0.2)
    inbox = await _reconnect(approver)  # the browser's inbox reconnects (with backoff, as approvals.js does)
    after = await database_sync_to_async(open_request)(tenant=acme, agent=agent)
    assert (await inbox.receive_json_from(timeout=5))["approval_id"] == after.pk
    await inbox.disconnect()

    def reread() -> set[int]:
        client = Client()
        client.force_login(approver)
        body = client.get(reverse("approvals_api:approval_list"), {"status": "pending"}).json()
        return {item["id"] for item in body["results"]}

    assert {before.pk, during.pk, after.pk} <= await database_sync_to_async(reread)()
