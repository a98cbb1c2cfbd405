"""Claims over the inbox websocket: "approver is looking at this", told live to the request's other approvers
and never to another tenant's, refused to a second claimant, released when the claimant's socket closes or
the claim lapses."""

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers

from approvals import claims
from console.services import create_agent
from tests.approvals.factories import open_request
from tests.approvals.test_websocket import _connect

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = 30  # a ceiling, not a delay: each receive returns as soon as its message arrives


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def _next(socket, kind: str) -> dict:
    """The socket's next message of this type (a request opening is announced too)."""
    while True:
        message = await socket.receive_json_from(timeout=WAIT)
        if message["type"] == kind:
            return message


async def test_a_claim_is_seen_live_by_the_other_approver_and_never_by_another_tenant(
    acme, globex, approver, second_approver, outsider, agent
):
    globex_agent, _ = await database_sync_to_async(create_agent)(tenant=globex, name="globex-bot", role="support")
    request = await database_sync_to_async(open_request)(tenant=acme, agent=agent)
    alice, bob, foreign = await _connect(approver), await _connect(second_approver), await _connect(outsider)
    for socket in (alice, bob, foreign):
        assert (await socket.connect())[0]

    await alice.send_json_to({"type": "claim", "approval_id": request.pk})
    seen = await _next(bob, "approval.claimed")
    assert seen["approval_id"] == request.pk and seen["by"] == "approver" and seen["tenant"] == "acme"
    assert (await _next(alice, "approval.claimed"))["by"] == "approver"
    assert (await database_sync_to_async(claims.current_claim)(request.pk)).username == "approver"

    # bob's claim on the same card is refused: he is told alice still holds it.
    await bob.send_json_to({"type": "claim", "approval_id": request.pk})
    assert (await _next(bob, "approval.claimed"))["by"] == "approver"

    # globex's approver claims nothing of acme's, and what reaches it next is its own tenant's news only.
    await foreign.send_json_to({"type": "claim", "approval_id": request.pk})
    globex_request = await database_sync_to_async(open_request)(tenant=globex, agent=globex_agent)
    first = await foreign.receive_json_from(timeout=WAIT)
    assert first == {
        "type": "approval.changed",
        "approval_id": globex_request.pk,
        "tenant": "globex",
        "status": "pending",
    }
    assert (await database_sync_to_async(claims.current_claim)(request.pk)).username == "approver"

    # alice leaves: her claim ends and bob is told.
    await alice.disconnect()
    assert (await _next(bob, "approval.claimed")) == {
        "type": "approval.claimed",
        "approval_id": request.pk,
        "tenant": "acme",
        "by": "",
        "expires_at": "",
    }
    assert await database_sync_to_async(claims.current_claim)(request.pk) is None
    await bob.disconnect()
    await foreign.disconnect()


async def test_release_frees_the_card_and_only_the_claimant_may_release(acme, approver, second_approver, agent):
    request = await database_sync_to_async(open_request)(tenant=acme, agent=agent)
    alice, bob = await _connect(approver), await _connect(second_approver)
    assert (await alice.connect())[0] and (await bob.connect())[0]
    await alice.send_json_to({"type": "claim", "approval_id": request.pk})
    assert (await _next(bob, "approval.claimed"))["by"] == "approver"
    await bob.send_json_to({"type": "release", "approval_id": request.pk})  # not his to release
    await alice.send_json_to({"type": "release", "approval_id": request.pk})
    assert (await _next(bob, "approval.claimed"))["by"] == ""
    await bob.send_json_to({"type": "claim", "approval_id": request.pk})
    told_alice = [(await _next(alice, "approval.claimed"))["by"] for _ in range(3)]
    assert told_alice == ["approver", "", "approver2"]  # her claim, her release, then bob's claim
    await alice.disconnect()
    await bob.disconnect()


def test_a_claim_lapses_and_a_viewer_cannot_claim(acme, approver, viewer, agent, clock, settings):
    request = open_request(tenant=acme, agent=agent)
    assert claims.claim_approval(approval=request, user=viewer) is None
    claim = claims.claim_approval(approval=request, user=approver)
    assert claim.username == "approver" and claims.claims_on([request.pk])[request.pk] == claim
    settings.AIRLOCK_APPROVAL_CLAIM_SECONDS = 10
    with claims_expiring(request.pk):
        assert claims.current_claim(request.pk) is None and claims.claims_on([request.pk]) == {}


class claims_expiring:
    """Store the claim as already past its expiry (the cache's own timeout does the same in production)."""

    def __init__(self, approval_id: int) -> None:
        self.approval_id = approval_id

    def __enter__(self):
        from django.core.cache import cache

        key = f"approvals.claim.{self.approval_id}"
        user_id, username, _ = cache.get(key)
        cache.set(key, (user_id, username, "2000-01-01T00:00:00+00:00"))

    def __exit__(self, *exc):
        return False
