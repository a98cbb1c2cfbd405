"""Linking a Slack user to an Airlock approver, proven from both ends.

A link token (approvals.slack) only says "this Slack user pressed a button"; whoever opens it in the
console may not be that person (a workspace member can send an approver their own link). So the console
only proposes: `propose_slack_link` records who proposed which Slack user and shows a one-time code once.
The link is made from Slack, by the Slack user of a request signed with the tenant's signing secret:
`proposal_for_code` finds the proposal their typed code matches (Airlock then names the console account),
and `confirm_slack_link` spends it and links. An approver phished into proposing someone else's Slack user
gives nothing away unless they also hand over the code their own screen tells them never to give.
"""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from approvals.models import SlackLink, SlackLinkProposal
from console.models import Role, Tenant
from console.tenancy import has_role, require_role

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a screen and typed
CODE_LENGTH = 8  # about 40 bits, and at most MAX_CODE_ATTEMPTS guesses
CODE_SALT = "airlock.approvals.slack-link-code"
PROPOSAL_MAX_AGE = timedelta(minutes=10)
MAX_CODE_ATTEMPTS = 5


class LinkRefused(ValueError):
    """The link cannot be proposed or made as asked; the message says why."""


def normalized(code: str) -> str:
    """The code as stored: upper case, letters and digits only (so `abcd-efgh ` is `ABCDEFGH`)."""
    return "".join(ch for ch in code.upper() if ch.isalnum())[:64]


def _hash(code: str) -> str:
    return salted_hmac(CODE_SALT, normalized(code), algorithm="sha256").hexdigest()


def _check_free(*, tenant: Tenant, user, team_id: str, slack_user_id: str) -> None:
    """LinkRefused unless both the person and the Slack user are still free to be linked to each other."""
    existing = SlackLink.objects.filter(tenant=tenant, user=user).first()
    if existing is not None:
        if (existing.slack_team_id, existing.slack_user_id) == (team_id, slack_user_id):
            raise LinkRefused(f"Slack user {slack_user_id} is already linked to {user.username}.")
        raise LinkRefused(f"You are already linked to Slack user {existing.slack_user_id}; unlink it first.")
    if SlackLink.objects.filter(tenant=tenant, slack_team_id=team_id, slack_user_id=slack_user_id).exists():
        raise LinkRefused("That Slack user is linked to another Airlock account; its owner must unlink it.")


def propose_slack_link(*, tenant: Tenant, user, identity: dict) -> tuple[SlackLinkProposal, str]:
    """The signed-in approver says the Slack user of a link token is them: a proposal, and its code (shown
    once, kept as a hash). A new proposal replaces this person's earlier one for the same Slack user."""
    require_role(user, tenant, Role.APPROVER)
    team_id, slack_user_id = identity["team"], identity["user"]
    _check_free(tenant=tenant, user=user, team_id=team_id, slack_user_id=slack_user_id)
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    now = timezone.now()
    with transaction.atomic():
        SlackLinkProposal.objects.filter(tenant=tenant, expires_at__lte=now).delete()
        SlackLinkProposal.objects.filter(
            tenant=tenant, user=user, slack_team_id=team_id, slack_user_id=slack_user_id
        ).delete()
        proposal = SlackLinkProposal.objects.create(
            tenant=tenant,
            user=user,
            slack_team_id=team_id,
            slack_user_id=slack_user_id,
            slack_username=str(identity.get("name") or "")[:200],
            code_hash=_hash(code),
            created_at=now,
            expires_at=now + PROPOSAL_MAX_AGE,
        )
    return proposal, f"{code[:4]}-{code[4:]}"


def _open_proposals(*, tenant: Tenant, team_id: str, slack_user_id: str):
    return SlackLinkProposal.objects.filter(
        tenant=tenant,
        slack_team_id=team_id,
        slack_user_id=slack_user_id,
        expires_at__gt=timezone.now(),
        failed_attempts__lt=MAX_CODE_ATTEMPTS,
    )


def proposal_for_code(*, tenant: Tenant, team_id: str, slack_user_id: str, code: str) -> SlackLinkProposal:
    """The open proposal for this Slack user whose code they typed. A wrong code counts against every open
    proposal for them; after MAX_CODE_ATTEMPTS none is open any more."""
    if not normalized(code):
        raise LinkRefused("Type the code the Airlock console showed you in the box, then press the button.")
    waiting = _open_proposals(tenant=tenant, team_id=team_id, slack_user_id=slack_user_id)
    digest = _hash(code)
    for proposal in waiting.select_related("user"):
        if hmac.compare_digest(proposal.code_hash, digest):
            return proposal
    waiting.update(failed_attempts=F("failed_attempts") + 1)
    raise LinkRefused(
        "That code matches no link waiting for your Slack user here. A code works for ten minutes, "
        f"once, and for the Slack user it was made for; after {MAX_CODE_ATTEMPTS} wrong codes, open a new link."
    )


def confirm_slack_link(*, tenant: Tenant, team_id: str, slack_user_id: str, proposal_id: int, code: str) -> SlackLink:
    """The Slack user confirms the account Airlock named for their code: the proposal is spent (deleted,
    so it links once) and the link made, if its console user may still approve here."""
    proposal = proposal_for_code(tenant=tenant, team_id=team_id, slack_user_id=slack_user_id, code=code)
    if proposal.pk != proposal_id:
        raise LinkRefused("This confirmation is not for the link your code names.")
    user = proposal.user
    if not user.is_active or not has_role(user, tenant, Role.APPROVER):
        raise LinkRefused(f"{user.username} may no longer approve in {tenant.slug}.")
    with transaction.atomic():
        if not SlackLinkProposal.objects.filter(pk=proposal.pk, expires_at__gt=timezone.now()).delete()[0]:
            raise LinkRefused("This link was already confirmed or has expired.")
        _check_free(tenant=tenant, user=user, team_id=team_id, slack_user_id=slack_user_id)
        try:
            with transaction.atomic():
                link = SlackLink.objects.create(
                    tenant=tenant,
                    user=user,
                    slack_team_id=team_id,
                    slack_user_id=slack_user_id,
                    slack_username=proposal.slack_username,
                )
        except IntegrityError:
            raise LinkRefused("That Slack user or that account was linked meanwhile.") from None
        SlackLinkProposal.objects.filter(tenant=tenant, slack_team_id=team_id, slack_user_id=slack_user_id).delete()
    return link


def unlink_slack_user(*, tenant: Tenant, user) -> int:
    return SlackLink.objects.filter(tenant=tenant, user=user).delete()[0]
