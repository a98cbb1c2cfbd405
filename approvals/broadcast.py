"""Every websocket notification about approvals goes through here, sent after the transaction commits.

Channel layers deliver at most once, so a notification only says *which* request changed; the
browser re-reads the card, the list and the count from ordinary permission-checked views.
"""

import logging
from dataclasses import asdict, dataclass

from channels.layers import get_channel_layer
from django.db import transaction

from lib.awaiting import await_from_sync

logger = logging.getLogger(__name__)
SEND_TIMEOUT_S = 5.0  # a hint later than this is of no use; the inbox re-reads on reconnect anyway


def tenant_group(tenant_id: int) -> str:
    return f"approvals.tenant.{tenant_id}"


@dataclass(frozen=True)
class ApprovalChanged:
    """ "request 42 of tenant acme changed (now: approved)"."""

    approval_id: int
    tenant: str
    status: str
    routed: bool = False  # routed to a group: each socket forwards it only if `routed_to` its user
    type: str = "approval.changed"


def send_now(tenant_id: int, message: ApprovalChanged) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await_from_sync(lambda: layer.group_send(tenant_group(tenant_id), asdict(message)), timeout_s=SEND_TIMEOUT_S)
    except Exception:  # Redis down: the hint is lost, the row is committed; inboxes re-read on reconnect
        logger.warning(
            "could not broadcast approval %s (channel layer unavailable)", message.approval_id, exc_info=True
        )


def approval_changed(request) -> None:
    """Queue a notification about `request` for its tenant's approvers, once the caller commits."""
    message = ApprovalChanged(
        approval_id=request.pk, tenant=request.tenant.slug, status=request.status, routed=request.group_id is not None
    )
    tenant_id = request.tenant_id
    transaction.on_commit(lambda: send_now(tenant_id, message))


@dataclass(frozen=True)
class ClaimChanged:
    """ "alice is looking at request 42 of tenant acme (until 12:03:10)", or, with an empty `by`, no one is."""

    approval_id: int
    tenant: str
    by: str
    expires_at: str = ""
    routed: bool = False
    type: str = "approval.claimed"


async def claim_changed(tenant_id: int, message: ClaimChanged) -> None:
    """Tell the tenant's approvers who holds a card now; sent from the inbox socket, outside any transaction."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(tenant_group(tenant_id), asdict(message))
    except Exception:  # Redis down: the claim still holds; other inboxes see it on their next load
        logger.warning("could not broadcast the claim on approval %s", message.approval_id, exc_info=True)
