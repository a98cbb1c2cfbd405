"""Live, on PostgreSQL and Redis (channels_redis), through the real gate and the real ASGI application:
a refund routed to the billing group reaches only billing's approvers (and the tenant's admin), over
the websocket and in the inbox; an approver outside the group hears of the unrouted call only."""

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from airlock.asgi import application
from approvals import routing_rules
from console.env import channel_layer_from_url
from console.models import Role
from tests.approvals.gate_world import build_refund_world
from tests.conftest import make_user
from tests.runs.conftest import post_calls, start_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]

QUIET_S = 1.0  # how long a socket must stay silent to count as not told; a message comes within ~10 ms
ARRIVAL_CEILING_S = 15.0  # generous: a busy machine is slow, never wrong


@pytest.fixture
def redis_layer(settings):
    settings.CHANNEL_LAYERS = {"default": channel_layer_from_url(settings.REDIS_URL, prefix="airlock-test-routing")}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _routed_world(acme, approver):
    build_refund_world(acme)
    billing = routing_rules.create_group(tenant=acme, name="billing", actor="test")
    routing_rules.add_group_member(group=billing, user=approver, actor="test")
    routing_rules.save_route(
        tenant=acme, name="refunds", condition='skill.namespace == "billing"', group=billing, actor="test"
    )
    support = make_user("support-approver", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])
    overseer = make_user("overseer", tenant=acme, roles=[Role.ADMIN, Role.APPROVER, Role.VIEWER])
    return support, overseer


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def _socket(user) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    socket = WebsocketCommunicator(application, "/ws/approvals/", headers=headers)
    assert (await socket.connect())[0]
    return socket


async def _heard(socket: WebsocketCommunicator, expected: int) -> list[dict]:
    """The `expected` messages, each waited for with a generous ceiling, then proof that nothing else comes."""
    messages = [await socket.receive_json_from(timeout=ARRIVAL_CEILING_S) for _ in range(expected)]
    assert await socket.receive_nothing(timeout=QUIET_S), "a socket heard more than it should"
    return messages


def _calls(agent_key: str) -> dict:
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_key}")
    run = start_run(agent)
    refund = {
        "call_id": "refund",
        "name": "billing.create_refund",
        "arguments": {"customer_id": "c-1", "amount_cents": 900},
    }
    revoke = {"call_id": "revoke", "name": "iam.revoke_access", "arguments": {"customer_id": "c-1", "amount_cents": 1}}
    response = post_calls(agent, run["run_id"], [refund, revoke])
    assert response.status_code == 200, response.content
    return {r["call_id"]: r["approval_id"] for r in response.json()["results"]}


def _inbox(user) -> str:
    client = Client()
    client.force_login(user)
    return client.get(reverse("approvals:inbox")).content.decode()


def _approve_over_the_api(user, approval_id: int) -> int:
    client = APIClient()
    client.force_authenticate(user)
    url = reverse("approvals_api:approval_decision", args=[approval_id])
    return client.post(url, {"decision": "approve"}, format="json").status_code


async def test_a_routed_refund_reaches_only_billing_approvers(redis_layer, acme, approver, agent_and_key):
    support, overseer = await database_sync_to_async(_routed_world)(acme, approver)
    billing_socket, support_socket, overseer_socket = [await _socket(u) for u in (approver, support, overseer)]

    ids = await database_sync_to_async(_calls)(agent_and_key[1])

    billing_heard = {m["approval_id"] for m in await _heard(billing_socket, 2)}
    assert billing_heard == {ids["refund"], ids["revoke"]}
    assert [m["approval_id"] for m in await _heard(support_socket, 1)] == [ids["revoke"]]
    assert {m["approval_id"] for m in await _heard(overseer_socket, 2)} == {ids["refund"], ids["revoke"]}

    assert f'id="approval-{ids["refund"]}"' in await database_sync_to_async(_inbox)(approver)
    support_inbox = await database_sync_to_async(_inbox)(support)
    assert f'id="approval-{ids["revoke"]}"' in support_inbox and f'id="approval-{ids["refund"]}"' not in support_inbox

    # The support approver cannot decide it; billing's approval is heard by billing, never by support.
    assert await database_sync_to_async(_approve_over_the_api)(support, ids["refund"]) == 403
    assert await support_socket.receive_nothing(timeout=QUIET_S)
    assert await database_sync_to_async(_approve_over_the_api)(approver, ids["refund"]) == 200
    first = await billing_socket.receive_json_from(timeout=ARRIVAL_CEILING_S)
    assert (first["approval_id"], first["status"]) == (ids["refund"], "approved")
    assert await support_socket.receive_nothing(timeout=QUIET_S)
    for socket in (billing_socket, support_socket, overseer_socket):
        await socket.disconnect()


def _escalation_world(acme, approver):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.models import ApprovalRoute
    from approvals.services import escalate_overdue_approvals

    support, _ = _routed_world(acme, approver)
    leads = routing_rules.create_group(tenant=acme, name="billing leads", actor="test")
    routing_rules.add_group_member(group=leads, user=support, actor="test")
    route = ApprovalRoute.objects.get(name="refunds")
    routing_rules.save_route(
        tenant=acme,
        route=route,
        name="refunds",
        condition=route.condition,
        group=route.group,
        fallback_group=leads,
        actor="test",
    )
    return support, lambda: escalate_overdue_approvals(now=timezone.now() + timedelta(hours=2))


async def test_escalation_reaches_the_fallback_groups_socket(redis_layer, acme, approver, agent_and_key):
    lead, escalate = await database_sync_to_async(_escalation_world)(acme, approver)
    lead_socket = await _socket(lead)
    ids = await database_sync_to_async(_calls)(agent_and_key[1])
    assert [m["approval_id"] for m in await _heard(lead_socket, 1)] == [ids["revoke"]]  # not the refund, yet

    assert await database_sync_to_async(escalate)() == 2
    heard = await _heard(lead_socket, 2)  # both requests escalated; the refund is now routed to leads too
    assert {m["approval_id"] for m in heard} == {ids["refund"], ids["revoke"]}
    assert f'id="approval-{ids["refund"]}"' in await database_sync_to_async(_inbox)(lead)
    await lead_socket.disconnect()
