"""One hint, many open inbox sockets: their checks run together (approvals.consumers._Batcher), and each socket
is still judged alone, on its own session, user, tenants and routing, against the database as it is when the
hint arrives. Written as an attacker would try it: a batch must never let one socket's verdict stand for another."""

import inspect
from datetime import timedelta

import channels.consumer
import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

import approvals.consumers as consumers
from airlock.asgi import application
from approvals import routing_rules
from approvals.consumers import ROLE_LOST, SESSION_ENDED, AccessCheck, RoutedCheck, refusals
from approvals.models import ApprovalRequest
from console.models import Role
from console.services import set_member_roles
from tests.approvals.factories import open_request
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def _key(browser: Client) -> str:
    return browser.cookies[settings.SESSION_COOKIE_NAME].value


def test_a_batch_of_checks_is_two_statements_and_each_socket_gets_its_own_verdict(
    acme, globex, approver, second_approver, django_assert_num_queries
):
    """Sockets whose access ended in every way there is, checked in one batch with sockets that are fine."""
    names = ("fine", "logged_out", "role_lost", "deactivated", "expired", "deleted", "password")
    users = {name: make_user(f"u-{name}", tenant=acme, roles=[Role.APPROVER]) for name in names}
    browsers = {name: _browser(user) for name, user in users.items()}
    checks = {name: AccessCheck(_key(browsers[name]), users[name].pk, {acme.pk}) for name in names}
    # Another user's live session, a made-up key and no key at all, each presented for `approver`.
    checks["borrowed"] = AccessCheck(_key(_browser(second_approver)), approver.pk, {acme.pk})
    checks["made_up"] = AccessCheck("not-a-session-key", approver.pk, {acme.pk})
    checks["none"] = AccessCheck(None, approver.pk, {acme.pk})
    # The same user on two sockets: one listens to a tenant where they are not an approver.
    checks["own"] = AccessCheck(_key(_browser(approver)), approver.pk, {acme.pk})
    checks["other_tenant"] = AccessCheck(_key(_browser(approver)), approver.pk, {acme.pk, globex.pk})

    browsers["logged_out"].logout()
    set_member_roles(tenant=acme, user=users["role_lost"], roles={Role.VIEWER})
    get_user_model().objects.filter(pk=users["deactivated"].pk).update(is_active=False)
    sessions = Session.objects.filter
    sessions(session_key=_key(browsers["expired"])).update(expire_date=timezone.now() - timedelta(seconds=1))
    sessions(session_key=_key(browsers["deleted"])).delete()
    users["password"].set_password("a-new-long-password")
    users["password"].save()

    batch = list(checks.values())
    with django_assert_num_queries(3):  # the sessions; the users for {acme}; the users for {acme, globex}
        verdicts = dict(zip(checks, refusals(batch), strict=True))
    assert verdicts == {
        "fine": None,
        "logged_out": SESSION_ENDED,
        "role_lost": ROLE_LOST,
        "deactivated": SESSION_ENDED,
        "expired": SESSION_ENDED,
        "deleted": SESSION_ENDED,
        "password": SESSION_ENDED,
        "borrowed": SESSION_ENDED,
        "made_up": SESSION_ENDED,
        "none": SESSION_ENDED,
        "own": None,
        "other_tenant": ROLE_LOST,
    }
    assert verdicts == {name: check.refusal() for name, check in checks.items()}  # as each would alone


def test_a_batch_of_a_hundred_sockets_is_still_two_statements(acme, django_assert_num_queries):
    users = [make_user(f"approver-{i}", tenant=acme, roles=[Role.APPROVER]) for i in range(100)]
    checks = [AccessCheck(_key(_browser(user)), user.pk, {acme.pk}) for user in users]
    for _ in range(2):
        with django_assert_num_queries(2):
            assert refusals(checks) == [None] * 100


def _routed_request(acme, agent, group):
    request = open_request(tenant=acme, agent=agent)
    ApprovalRequest.objects.filter(pk=request.pk).update(group=group)
    return request


def test_routing_compiled_at_connect_still_follows_group_changes(acme, agent, approver, second_approver):
    """The routing query is compiled when the socket connects, but what it reads is read at each hint: a
    member removed from the group after connecting stops hearing of its requests, one added starts."""
    billing = routing_rules.create_group(tenant=acme, name="billing", actor="test")
    routing_rules.add_group_member(group=billing, user=approver, actor="test")
    request = _routed_request(acme, agent, billing)
    member, outsider = RoutedCheck(approver), RoutedCheck(second_approver)
    assert member.routed_here(request.pk) and not outsider.routed_here(request.pk)

    routing_rules.remove_group_member(group=billing, user=approver, actor="test")
    routing_rules.add_group_member(group=billing, user=second_approver, actor="test")
    assert not member.routed_here(request.pk) and outsider.routed_here(request.pk)
    assert not member.routed_here(request.pk + 1000)  # a request that does not exist


def test_routing_agrees_with_routed_to_for_every_kind_of_user(acme, globex, agent, approver, platform_admin):
    billing = routing_rules.create_group(tenant=acme, name="billing", actor="test")
    routing_rules.add_group_member(group=billing, user=approver, actor="test")
    people = [
        approver,
        platform_admin,
        make_user("acme-admin", tenant=acme, roles=[Role.ADMIN]),
        make_user("acme-approver", tenant=acme, roles=[Role.APPROVER]),
        make_user("acme-viewer", tenant=acme, roles=[Role.VIEWER]),
        make_user("globex-admin", tenant=globex, roles=[Role.ADMIN, Role.APPROVER]),
    ]
    requests = [_routed_request(acme, agent, billing), open_request(tenant=acme, agent=agent)]
    for person in people:
        check = RoutedCheck(person)
        for request in requests:
            expected = ApprovalRequest.objects.routed_to(person, everything=True).filter(pk=request.pk).exists()
            assert check.routed_here(request.pk) == expected, (person.username, request.group_id)


async def _socket(user) -> WebsocketCommunicator:
    browser = await database_sync_to_async(_browser)(user)
    socket = WebsocketCommunicator(
        application,
        "/ws/approvals/",
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={_key(browser)}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    socket.browser = browser
    return socket


async def test_one_hint_to_many_sockets_closes_exactly_the_ones_whose_access_ended(acme, agent, monkeypatch):
    """Five sockets, one trip to the database thread for the hint (two if a socket was late to the batch), and
    each socket closed or told as its own access says."""
    people = [
        await database_sync_to_async(make_user)(f"live-{i}", tenant=acme, roles=[Role.APPROVER]) for i in range(5)
    ]
    sockets = [await _socket(person) for person in people]
    trips, hops = [], []
    verdicts = consumers._verdicts
    monkeypatch.setattr(consumers, "_verdicts", lambda asks: trips.append(len(asks)) or verdicts(asks))
    close_old = channels.consumer.aclose_old_connections
    monkeypatch.setattr(channels.consumer, "aclose_old_connections", lambda: hops.append(1) or close_old())

    await database_sync_to_async(set_member_roles)(tenant=acme, user=people[1], roles={Role.VIEWER})
    await database_sync_to_async(sockets[2].browser.logout)()
    request = await database_sync_to_async(open_request)(tenant=acme, agent=agent)

    for index in (0, 3, 4):
        assert (await sockets[index].receive_json_from(timeout=30))["approval_id"] == request.pk
    for index, code in ((1, ROLE_LOST), (2, SESSION_ENDED)):
        output = await sockets[index].receive_output(timeout=30)
        assert output == {"type": "websocket.close", "code": code}, "an event was forwarded after access ended"
    assert sum(trips) == 5 and len(trips) <= 2
    assert hops == []  # no idle hop to the database thread per socket before its handler (channels' dispatch)
    for index in (0, 3, 4):
        await sockets[index].disconnect()


def test_channels_still_hops_to_the_database_thread_before_each_message():
    """`ApprovalsConsumer.dispatch` skips channels' own dispatch for the tenant groups' hints because channels
    (4.2+) closes old connections, a hop to the database thread, before every message. When channels stops
    doing so, this fails: the override is then no longer needed and should go."""
    assert "aclose_old_connections" in inspect.getsource(channels.consumer.AsyncConsumer.dispatch)
