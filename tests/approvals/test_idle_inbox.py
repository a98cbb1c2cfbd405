"""An approver's inbox socket that hears nothing for a minute stays open on the deployed channel layer.

With redis-py 8 every socket read gave up after 5 s by default, the length of channels_redis's idle
blocking read: each idle consumer's read lost that race, raised `TimeoutError: Timeout reading`, and the
socket closed 5 s after it connected, every time (channels_redis#422, redis-py#4091).
"""

from __future__ import annotations

import asyncio
import math
import os
import time

import pytest
import redis
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from channels_redis.core import RedisChannelLayer
from django.conf import settings as django_settings
from django.test import Client

from airlock.asgi import application
from console.env import channel_layer_from_url
from tests.approvals.factories import open_request

IDLE_S = 60
ARRIVAL_CEILING_S = 30  # the event takes well under a second here (printed); the ceiling is for a busy machine


def _layer_on(url: str) -> RedisChannelLayer:
    return RedisChannelLayer(**channel_layer_from_url(url, prefix="idle")["CONFIG"])


def test_a_read_outlives_the_layers_idle_blocking_read_by_a_margin():
    """Read from the pinned libraries themselves: fails if channels_redis waits longer or redis-py reads shorter."""
    layer = _layer_on("redis://127.0.0.1:6379/0")
    pool = layer.create_pool(0)  # builds no socket
    connection = pool.connection_class(**pool.connection_kwargs)
    assert connection.socket_timeout is not None and math.isfinite(connection.socket_timeout)
    # Redis may answer an expired blocking read a little late (redis-py#748), more so on a busy machine.
    assert connection.socket_timeout - layer.brpop_timeout >= 5


async def test_a_redis_that_stops_answering_is_still_noticed():
    """A server that accepts the connection and never replies: the idle read fails instead of hanging."""
    held = []  # the open connections, kept so that none is closed by being collected
    silent = await asyncio.start_server(lambda reader, writer: held.append(writer), "127.0.0.1", 0)
    layer = _layer_on(f"redis://127.0.0.1:{silent.sockets[0].getsockname()[1]}/0")
    try:
        with pytest.raises(redis.TimeoutError):
            await asyncio.wait_for(layer.receive(await layer.new_channel()), timeout=IDLE_S)
    finally:
        await layer.close_pools()
        for writer in held:
            writer.close()
        silent.close()


@pytest.fixture
def deployed_layer(settings):
    """The channel layer exactly as settings build it from REDIS_URL, under a prefix of this test's own."""
    config = settings.CHANNEL_LAYERS["default"]
    assert config["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    settings.CHANNEL_LAYERS = {"default": {**config, "CONFIG": {**config["CONFIG"], "prefix": f"idle-{os.getpid()}"}}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


async def _approvers_socket(user) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    return WebsocketCommunicator(application, "/ws/approvals/", headers=headers)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_an_idle_approvers_socket_stays_open_and_hears_a_new_request_live(deployed_layer, acme, approver, agent):
    socket = await _approvers_socket(approver)
    assert (await socket.connect())[0]

    # Idle for a minute, waking early only if the consumer ends: on the broken layer it did after ~5 s.
    connected_at = time.monotonic()
    ended, _ = await asyncio.wait({socket.future}, timeout=IDLE_S)
    if ended:
        lasted = time.monotonic() - connected_at
        pytest.fail(f"the idle socket closed after {lasted:.1f} s: {socket.future.exception()!r}")

    opened_at = time.monotonic()
    request = await database_sync_to_async(open_request)(tenant=acme, agent=agent)
    message = await socket.receive_json_from(timeout=ARRIVAL_CEILING_S)
    latency = time.monotonic() - opened_at
    print(f"after {IDLE_S} s idle, the new request reached the approver's socket in {latency * 1000:.0f} ms")
    assert message == {"type": "approval.changed", "approval_id": request.pk, "tenant": "acme", "status": "pending"}
    await socket.disconnect()
