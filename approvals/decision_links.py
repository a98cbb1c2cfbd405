"""Deciding from an e-mail: each notice e-mail carries a link signed for one request and one recipient.

The link opens a confirmation page in the console (a GET changes nothing); the decision is a POST by
the signed-in recipient, made through `services.decide_approval` (every rule of the inbox), after
which the link is spent. The link expires after AIRLOCK_EMAIL_LINK_MAX_AGE_HOURS.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from approvals import services
from approvals.models import ApprovalNotice, ApprovalRequest
from lib.public_url import public_reverse

SALT = "airlock.approvals.email-decision"


class LinkRefused(ValueError):
    """The link is forged, expired or spent: nothing was decided. The message says which."""


class WrongRecipient(PermissionDenied):
    """The link was sent to another person."""


def token_of(notice: ApprovalNotice) -> str:
    return signing.dumps({"n": notice.pk, "a": notice.approval_id, "u": notice.user_id}, salt=SALT)


def link_of(notice: ApprovalNotice) -> str:
    """The recipient's own link to decide this request from the e-mail."""
    return public_reverse("approvals:email_decision", args=[token_of(notice)])


def notice_of_link(token: str) -> ApprovalNotice:
    """The notice a link was made for; LinkRefused when it is not Airlock's or has expired."""
    try:
        data = signing.loads(token, salt=SALT, max_age=settings.AIRLOCK_EMAIL_LINK_MAX_AGE_HOURS * 3600)
    except signing.SignatureExpired:
        raise LinkRefused("This link has expired; open the request in the inbox instead.") from None
    except signing.BadSignature:
        raise LinkRefused("This link is not one Airlock sent.") from None
    notice = (
        ApprovalNotice.objects.select_related("approval__tenant", "user")
        .filter(pk=data.get("n"), approval_id=data.get("a"), user_id=data.get("u"))
        .first()
    )
    if notice is None:
        raise LinkRefused("This link's request no longer exists.")
    return notice


def check_recipient(notice: ApprovalNotice, user) -> None:
    if notice.user_id != user.pk:
        raise WrongRecipient(
            "This link was sent to another account: sign in as the person it was mailed to, "
            "or open the request from your inbox."
        )


def decide_by_link(*, notice: ApprovalNotice, user, decision: str, reason: str) -> ApprovalRequest:
    """The recipient decides from the confirmation page. A spent link is refused; two racing POSTs
    are one decision, as in the inbox (the request's conditional UPDATE, or one vote per person)."""
    check_recipient(notice, user)
    if notice.link_used_at is not None:
        raise LinkRefused(f"This link was already used at {notice.link_used_at:%Y-%m-%d %H:%M} UTC.")
    approval = ApprovalRequest.objects.select_related("tenant", "call__run", "call__skill_version").get(
        pk=notice.approval_id
    )
    approval = services.decide_approval(approval=approval, user=user, decision=decision, reason=reason, via="email")
    ApprovalNotice.objects.filter(pk=notice.pk, link_used_at__isnull=True).update(link_used_at=timezone.now())
    return approval
