"""An approver's open inbox socket after their access ends: it must stop at the next event, not at reconnect.

On the real ASGI application, with the session cookie a browser would send.
"""

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from airlock.asgi import application
from approvals.consumers import ROLE_LOST, SESSION_ENDED, AccessCheck
from console.models import Membership, Role
from console.services import create_agent, set_member_roles
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


async def test_the_socket_closes_at_the_first_event_after_the_user_is_deactivated(acme, agent, approver):
    socket = await _socket(await database_sync_to_async(_logged_in_browser)(approver))
    await database_sync_to_async(get_user_model().objects.filter(pk=approver.pk).update)(is_active=False)
    await _open(acme, agent)
    assert await _next_is_close(socket) == SESSION_ENDED
    await socket.wait()


@pytest.mark.parametrize("ended", ["expired", "deleted"])
async def test_the_socket_closes_once_its_session_row_has_expired_or_gone(acme, agent, approver, ended):
    """Changed in the database alone, as session cleanup or an operator would: no cache keeps it alive."""
    browser = await database_sync_to_async(_logged_in_browser)(approver)
    socket = await _socket(browser)
    rows = Session.objects.filter(session_key=browser.cookies[settings.SESSION_COOKIE_NAME].value)
    if ended == "expired":
        await database_sync_to_async(rows.update)(expire_date=timezone.now() - timedelta(seconds=1))
    else:
        await database_sync_to_async(rows.delete)()
    await _open(acme, agent)
    assert await _next_is_close(socket) == SESSION_ENDED
    await socket.wait()


async def test_an_approver_of_two_tenants_who_loses_one_is_cut_off_from_both(acme, globex, agent, approver):
    """The socket listens to both tenants' groups: losing either role closes it, whichever tenant the event is of."""
    await database_sync_to_async(Membership.objects.create)(tenant=globex, user=approver, role=Role.APPROVER)
    socket = await _socket(await database_sync_to_async(_logged_in_browser)(approver))
    await database_sync_to_async(set_member_roles)(tenant=globex, user=approver, roles={Role.VIEWER})
    await _open(acme, agent)  # an event of the tenant the approver still approves in
    assert await _next_is_close(socket) == ROLE_LOST
    await socket.wait()


async def test_a_platform_admins_socket_receives_every_tenants_events(acme, globex, agent, platform_admin):
    socket = await _socket(await database_sync_to_async(_logged_in_browser)(platform_admin))
    outsider_agent = (await database_sync_to_async(create_agent)(tenant=globex, name="globex-bot", role="support"))[0]
    for tenant, by in ((acme, agent), (globex, outsider_agent)):
        request = await _open(tenant, by)
        assert (await socket.receive_json_from(timeout=3))["approval_id"] == request.pk
    await socket.disconnect()


def test_a_session_of_another_user_does_not_keep_a_socket_open(acme, approver, second_approver):
    """The check before a message reads the session's own user: a socket cannot claim someone else's session."""
    other_session = _logged_in_browser(second_approver).cookies[settings.SESSION_COOKIE_NAME].value
    own_session = _logged_in_browser(approver).cookies[settings.SESSION_COOKIE_NAME].value
    assert AccessCheck(own_session, approver.pk, {acme.pk}).refusal() is None
    assert AccessCheck(other_session, approver.pk, {acme.pk}).refusal() == SESSION_ENDED
    assert AccessCheck("not-a-session-key", approver.pk, {acme.pk}).refusal() == SESSION_ENDED
    assert AccessCheck(None, approver.pk, {acme.pk}).refusal() == SESSION_ENDED


def test_the_check_before_each_message_is_one_query(acme, globex, approver, platform_admin, django_assert_num_queries):
    """Every socket checks before every message it forwards, on the workers' one shared database thread:
    the session, the user and their roles in one round trip (three before)."""
    Membership.objects.create(tenant=globex, user=approver, role=Role.APPROVER)
    for user, tenant_ids in ((approver, {acme.pk, globex.pk}), (platform_admin, {acme.pk, globex.pk})):
        check = AccessCheck(_logged_in_browser(user).cookies[settings.SESSION_COOKIE_NAME].value, user.pk, tenant_ids)
        for _ in range(3):  # compiled once, at connect: each message's check is the one statement
            with django_assert_num_queries(1):
                assert check.refusal() is None


def test_a_session_engine_outside_the_database_is_still_checked_before_each_message(acme, approver, settings):
    """With sessions in the cache the check loads the session itself (one more round trip), and a logout
    still ends the socket."""
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    browser = _logged_in_browser(approver)
    check = AccessCheck(browser.cookies[settings.SESSION_COOKIE_NAME].value, approver.pk, {acme.pk})
    assert check.refusal() is None
    browser.logout()
    assert check.refusal() == SESSION_ENDED
