"""Invitations for tests, with the token their mailed link would carry."""

from __future__ import annotations

from console import services
from console.models import Invitation


def invitation_with_token(*, tenant, address: str, invited_by, roles=("viewer",)) -> tuple[Invitation, str]:
    """A pending invitation made through the service, and a token for its link (reissued: a username
    invitation is not mailed, so the service's own token is never seen)."""
    invitation = services.invite_member(tenant=tenant, address=address, roles=set(roles), invited_by=invited_by)
    token = invitation.issue_token()
    invitation.save(update_fields=["token_hash"])
    return invitation, token
