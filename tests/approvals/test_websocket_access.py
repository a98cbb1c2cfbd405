"""An approver's open inbox socket after their access ends: it must stop at the next event, not at reconnect.

On the real ASGI application, with the session cookie a browser would send.
"""

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse

from airlock.asgi import application
from approvals.consumers import ROLE_LOST, SESSION_ENDED
from console.models import Role
from console.services import set_member_roles
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _logged_in_browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


async def _socket(browser: Client) -> WebsocketCommunicator:
    cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
    socket = WebsocketCommunicator(
        application,
        "/ws/approvals/",
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    return socket


async def _open(tenant, agent):
    return await database_sync_to_async(open_request)(tenant=tenant, agent=agent)


async def _next_is_close(socket: WebsocketCommunicator) -> int:
    """The socket's next output must be a close, with no event before it; returns the close code."""
    output = await socket.receive_output(timeout=3)
    assert output["type"] == "websocket.close", f"an event was forwarded after access ended: {output}"
    return output["code"]


async def test_the_socket_closes_at_the_first_event_after_the_role_is_removed(acme, agent, approver):
    browser = await database_sync_to_async(_logged_in_browser)(approver)
    socket = await _socket(browser)
    first = await _open(acme, agent)
    assert (await socket.receive_json_from(timeout=3))["approval_id"] == first.pk  # still an approver

    await database_sync_to_async(set_member_roles)(tenant=acme, user=approver, roles={Role.VIEWER})
    await _open(acme, agent)
    assert await _next_is_close(socket) == ROLE_LOST
    await socket.wait()


async def test_the_socket_closes_at_the_first_event_after_logout(acme, agent, approver):
    browser = await database_sync_to_async(_logged_in_browser)(approver)
    socket = await _socket(browser)
    response = await database_sync_to_async(browser.post)(reverse("console:logout"))
    assert response.status_code == 302
    await _open(acme, agent)
    assert await _next_is_close(socket) == SESSION_ENDED
    await socket.wait()


async def test_the_socket_closes_after_a_password_change_elsewhere(acme, agent, approver):
    """Changing the password ends every other session (Django's session hash); the socket follows."""
    browser = await database_sync_to_async(_logged_in_browser)(approver)
    socket = await _socket(browser)

    def change_password():
        approver.set_password("a-new-long-password")
        approver.save()

    await database_sync_to_async(change_password)()
    await _open(acme, agent)
    assert await _next_is_close(socket) == SESSION_ENDED
    await socket.wait()


async def test_another_approvers_socket_keeps_receiving(acme, agent, approver, second_approver):
    leaving = await _socket(await database_sync_to_async(_logged_in_browser)(approver))
    staying = await _socket(await database_sync_to_async(_logged_in_browser)(second_approver))
    await database_sync_to_async(set_member_roles)(tenant=acme, user=approver, roles=set())
    request = await _open(acme, agent)
    assert await _next_is_close(leaving) == ROLE_LOST
    assert (await staying.receive_json_from(timeout=3))["approval_id"] == request.pk
    await staying.disconnect()
