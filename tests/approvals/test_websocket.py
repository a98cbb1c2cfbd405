"""The inbox websocket on the real ASGI application: per-tenant groups, auth and origin checks."""

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from airlock.asgi import application
from approvals.services import decide_approval
from console.env import channel_layer_from_url
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/ws/approvals/"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def layer(request, settings):
    """Run each test on the in-memory layer and, with REDIS_URL, on channels_redis."""
    if request.param == "redis":
        settings.CHANNEL_LAYERS = {"default": channel_layer_from_url(settings.REDIS_URL, prefix="airlock-test-ws")}
    else:
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield request.param
    channel_layers.backends.clear()


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def _connect(user=None, origin: str = "http://testserver") -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
    if user is not None:
        cookie = await database_sync_to_async(_session_cookie)(user)
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, PATH, headers=headers)


async def _open(tenant, agent):
    return await database_sync_to_async(open_request)(tenant=tenant, agent=agent)


async def test_approver_receives_own_tenants_requests_never_anothers(layer, acme, globex, approver, outsider, agent):
    from console.services import create_agent

    globex_agent, _ = await database_sync_to_async(create_agent)(tenant=globex, name="billing-bot", role="billing")
    acme_socket, globex_socket = await _connect(approver), await _connect(outsider)
    assert (await acme_socket.connect())[0] and (await globex_socket.connect())[0]

    acme_request = await _open(acme, agent)
    message = await acme_socket.receive_json_from(timeout=3)
    assert message == {
        "type": "approval.changed",
        "approval_id": acme_request.pk,
        "tenant": "acme",
        "status": "pending",
    }
    assert await globex_socket.receive_nothing(timeout=0.3)

    globex_request = await _open(globex, globex_agent)
    assert (await globex_socket.receive_json_from(timeout=3))["approval_id"] == globex_request.pk
    assert await acme_socket.receive_nothing(timeout=0.3)
    await acme_socket.disconnect()
    await globex_socket.disconnect()


async def test_unauthenticated_socket_is_refused(layer, acme):
    socket = await _connect(None)
    connected, _ = await socket.connect()
    assert not connected


async def test_foreign_origin_is_refused(layer, approver):
    socket = await _connect(approver, origin="https://evil.example")
    connected, _ = await socket.connect()
    assert not connected


async def test_viewer_joins_no_group(layer, acme, viewer, agent):
    socket = await _connect(viewer)
    assert (await socket.connect())[0]
    await _open(acme, agent)
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()


async def test_a_decision_reaches_every_other_approvers_socket(
    layer, acme, approver, second_approver, agent, executions
):
    request = await _open(acme, agent)
    mine, theirs = await _connect(approver), await _connect(second_approver)
    assert (await mine.connect())[0] and (await theirs.connect())[0]
    await database_sync_to_async(decide_approval)(approval=request, user=approver, decision="approve")
    seen = []
    while True:  # approved, then executing and executed as the resume task runs (eager here)
        message = await theirs.receive_json_from(timeout=3)
        seen.append(message["status"])
        if message["status"] == "executed":
            break
    assert seen[0] == "approved" and all(m == request.pk for m in [request.pk])
    assert (await mine.receive_json_from(timeout=3))["status"] == "approved"
    await mine.disconnect()
    await theirs.disconnect()
