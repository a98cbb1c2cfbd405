"""Approval hints sent from sync code outside a request (a Celery task) reuse one event loop, and with it
channels_redis's connection, instead of connecting to Redis for every hint (lib/awaiting.py)."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import channel_layers, get_channel_layer

from approvals.broadcast import ApprovalChanged, send_now, tenant_group
from console.env import channel_layer_from_url
from lib.awaiting import await_from_sync


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


async def _never() -> None:
    await asyncio.Event().wait()  # nothing sets it: a downstream that never answers


@pytest.fixture
def redis_layer(settings):
    prefix = f"airlock-test-broadcast-{os.getpid()}"
    settings.CHANNEL_LAYERS = {"default": channel_layer_from_url(settings.REDIS_URL, prefix=prefix)}
    channel_layers.backends.clear()
    yield get_channel_layer()
    channel_layers.backends.clear()


def _connections_received(client: redis.Redis) -> int:
    return client.info("stats")["total_connections_received"]


@pytest.mark.redis
def test_thirty_hints_from_a_worker_open_at_most_one_redis_connection_and_all_arrive(redis_layer, settings):
    channel = await_from_sync(redis_layer.new_channel, timeout_s=5)
    await_from_sync(lambda: redis_layer.group_add(tenant_group(7), channel), timeout_s=5)
    witness = redis.Redis.from_url(settings.REDIS_URL)
    before = _connections_received(witness)
    for approval_id in range(30):
        send_now(7, ApprovalChanged(approval_id=approval_id, tenant="acme", status="pending"))
    opened = _connections_received(witness) - before
    assert opened <= 1, f"30 hints opened {opened} Redis connections"  # one per hint before lib/awaiting
    received = [await_from_sync(lambda: redis_layer.receive(channel), timeout_s=5) for _ in range(30)]
    assert [message["approval_id"] for message in received] == list(range(30))


def test_outside_a_request_every_call_runs_on_the_same_loop():
    first = await_from_sync(_running_loop, timeout_s=2)
    assert await_from_sync(_running_loop, timeout_s=2) is first and first.is_running()


async def test_on_a_requests_thread_the_coroutine_runs_on_the_requests_loop():
    """Where the in-memory channel layer's consumers live: the hint must be put on their loop."""
    mine = asyncio.get_running_loop()
    assert await sync_to_async(lambda: await_from_sync(_running_loop, timeout_s=2))() is mine


def test_a_forked_child_gets_a_loop_of_its_own():
    """A Celery prefork child inherits the parent's loop object but not its thread."""
    await_from_sync(_running_loop, timeout_s=2)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the call completes on a live loop of its own
        try:
            loop = await_from_sync(_running_loop, timeout_s=2)
            os._exit(0 if loop.is_running() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_coroutine_that_outlives_its_timeout_raises_and_is_cancelled():
    with pytest.raises(TimeoutError):
        await_from_sync(_never, timeout_s=0.05)
