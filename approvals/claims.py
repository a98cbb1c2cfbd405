"""Claims on inbox cards: "alice is looking at this", so that two approvers do not work one request.

A claim is advisory: it tells the other approvers who is on a card, and deciding stays with the decide
service and its rules. It lives in the shared cache (Redis in every deployment with workers), lapses
`AIRLOCK_APPROVAL_CLAIM_SECONDS` after the claimant's open page last renewed it, and ends at once when
her inbox socket closes (approvals.consumers). The first claimant holds it until then: a second approver's
claim is refused and told who holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import may_decide


@dataclass(frozen=True)
class Claim:
    approval_id: int
    user_id: int
    username: str
    expires_at: datetime


def _key(approval_id: int) -> str:
    return f"approvals.claim.{approval_id}"


def _as_claim(approval_id: int, stored) -> Claim | None:
    if not stored:
        return None
    user_id, username, expires = stored
    expires_at = datetime.fromisoformat(expires)
    return Claim(approval_id, user_id, username, expires_at) if expires_at > timezone.now() else None


def claim_approval(*, approval: ApprovalRequest, user) -> Claim | None:
    """Claim (or renew one's own claim on) a pending request the user may decide; returns the claim that
    holds the card afterwards: the user's own, or the earlier claimant's. None when the user may not."""
    if not approval.is_pending or not may_decide(user, approval):
        return None
    seconds = settings.AIRLOCK_APPROVAL_CLAIM_SECONDS
    expires_at = timezone.now() + timedelta(seconds=seconds)
    stored = (user.pk, user.get_username(), expires_at.isoformat())
    if cache.add(_key(approval.pk), stored, timeout=seconds):
        return Claim(approval.pk, user.pk, user.get_username(), expires_at)
    holder = current_claim(approval.pk)
    if holder is None or holder.user_id == user.pk:  # lapsed just now, or a renewal of one's own
        cache.set(_key(approval.pk), stored, timeout=seconds)
        return Claim(approval.pk, user.pk, user.get_username(), expires_at)
    return holder


def release_claim(*, approval_id: int, user) -> bool:
    """End the user's own claim; another approver's claim is left alone. Whether one was released."""
    holder = current_claim(approval_id)
    if holder is None or holder.user_id != user.pk:
        return False
    cache.delete(_key(approval_id))
    return True


def current_claim(approval_id: int) -> Claim | None:
    return _as_claim(approval_id, cache.get(_key(approval_id)))


def claims_on(approval_ids: list[int]) -> dict[int, Claim]:
    """The live claims on these requests, by request id: one cache round trip for a whole inbox page."""
    stored = cache.get_many([_key(pk) for pk in approval_ids])
    claims = {pk: _as_claim(pk, stored.get(_key(pk))) for pk in approval_ids}
    return {pk: claim for pk, claim in claims.items() if claim is not None}
