"""Use cases of the console: agents, memberships and personal access tokens."""

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from console.models import Agent, Membership, PersonalAccessToken, Role, Tenant

User = get_user_model()


def create_agent(*, tenant: Tenant, name: str, role: str, created_by=None) -> tuple[Agent, str]:
    """Create an agent and return it with its API key, which is shown once and never stored."""
    agent = Agent(tenant=tenant, name=name, role=role, created_by=created_by)
    key = agent.issue_key()
    agent.save()
    return agent, key


def revoke_agent(*, agent: Agent) -> Agent:
    if agent.revoked_at is None:
        agent.revoked_at = timezone.now()
        agent.save(update_fields=["revoked_at"])
    return agent


@transaction.atomic
def set_member_roles(*, tenant: Tenant, user, roles: set[str]) -> set[str]:
    """Make the user's roles in the tenant exactly `roles` (empty removes the member)."""
    valid = {choice.value for choice in Role}
    unknown = roles - valid
    if unknown:
        raise ValueError(f"Unknown roles: {', '.join(sorted(unknown))}")
    Membership.objects.filter(tenant=tenant, user=user).exclude(role__in=roles).delete()
    for role in roles:
        Membership.objects.get_or_create(tenant=tenant, user=user, role=role)
    return roles


def create_personal_token(*, user, name: str) -> tuple[PersonalAccessToken, str]:
    token = PersonalAccessToken(user=user, name=name)
    key = token.issue_key()
    token.save()
    return token, key


def revoke_personal_token(*, token: PersonalAccessToken) -> PersonalAccessToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token
