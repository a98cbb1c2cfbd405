"""Use cases of the console: agents, memberships, invitations and personal access tokens."""

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from console import hooks
from console.models import (
    DEFAULT_KEY_GRACE,
    INVITATION_TTL,
    MAX_KEY_GRACE,
    MAX_SUSPENSION,
    Agent,
    AgentKeyEvent,
    Invitation,
    InvitationEvent,
    Membership,
    MembershipAction,
    MembershipEvent,
    OperatorAction,
    PersonalAccessToken,
    Role,
    Team,
    Tenant,
    TokenScope,
    slug_validator,
)
from lib import clock
from lib.public_url import public_reverse

User = get_user_model()


def _issue_unused_key(agent: Agent) -> str:
    """A new key whose lookup is no agent's current or previous lookup (so a lookup finds one key)."""
    while True:
        key = agent.issue_key()
        lookup = agent.key_lookup
        if not Agent.objects.filter(Q(key_lookup=lookup) | Q(previous_key_lookup=lookup)).exists():
            return key


def set_default_context_budget(*, tenant: Tenant, tokens: int | None) -> Tenant:
    """Tokens of tool results a run's model is given before the oldest are replaced by summaries, for the
    tenant's runs that start from now on without a budget of their own; None for no budget."""
    Tenant.objects.filter(pk=tenant.pk).update(default_context_budget=tokens)
    tenant.default_context_budget = tokens
    return tenant


def create_agent(*, tenant: Tenant, name: str, role: str, created_by=None) -> tuple[Agent, str]:
    """Create an agent and return it with its API key, which is shown once and never stored."""
    agent = Agent(tenant=tenant, name=name, role=role, created_by=created_by)
    key = _issue_unused_key(agent)
    agent.save()
    return agent, key


def revoke_agent(*, agent: Agent) -> Agent:
    if agent.revoked_at is None:
        agent.revoked_at = timezone.now()
        agent.save(update_fields=["revoked_at"])
    return agent


# --- agent key rotation ------------------------------------------------------------------------
class KeyRotationRefused(ValueError):
    """The rotation or cut-off cannot happen; the message says why, for the admin."""


def _record_key_event(agent: Agent, *, action: str, actor, detail: dict) -> AgentKeyEvent:
    return AgentKeyEvent.objects.create(
        tenant_id=agent.tenant_id,
        agent=agent,
        action=action,
        actor=actor,
        actor_label=getattr(actor, "username", "") or "system",
        detail=detail,
    )


def rotate_agent_key(*, agent: Agent, by, grace: timedelta = DEFAULT_KEY_GRACE) -> tuple[Agent, str]:
    """Give the agent a new key, returned once and never stored; the current key becomes its previous
    key and keeps working for `grace` (zero: it stops now). A previous key still in its grace period
    stops at once: an agent has at most two working keys."""
    if grace < timedelta(0) or grace > MAX_KEY_GRACE:
        raise KeyRotationRefused(f"The grace period is between 0 and {MAX_KEY_GRACE.days * 24} hours.")
    with transaction.atomic():
        agent = Agent.objects.select_for_update().select_related("tenant").get(pk=agent.pk)
        if agent.is_revoked:
            raise KeyRotationRefused(f"Agent {agent.name} is revoked; create a new agent instead.")
        now = clock.now()
        replaced = agent.key_lookup
        agent.previous_key_lookup, agent.previous_key_hash = agent.key_lookup, agent.key_hash
        agent.previous_key_created_at, agent.previous_key_last_used_at = agent.key_created_at, agent.last_used_at
        agent.previous_key_expires_at = now + grace
        key = _issue_unused_key(agent)
        agent.key_created_at, agent.last_used_at = now, None
        agent.save()
        grace_seconds = int(grace.total_seconds())
        detail = {"new_key": f"ak_{agent.key_lookup}", "old_key": f"ak_{replaced}", "grace_seconds": grace_seconds}
        _record_key_event(agent, action="rotated", actor=by, detail=detail)
    return agent, key


def cut_off_old_key(*, agent: Agent, by) -> Agent:
    """End the previous key's grace period now: from the next request on, only the current key works."""
    with transaction.atomic():
        now = clock.now()
        won = Agent.objects.filter(pk=agent.pk, previous_key_expires_at__gt=now).update(previous_key_expires_at=now)
        agent.refresh_from_db()
        if not won:
            raise KeyRotationRefused(f"Agent {agent.name} has no old key that still works.")
        _record_key_event(agent, action="cut_off", actor=by, detail={"old_key": f"ak_{agent.previous_key_lookup}"})
    return agent


def _check_roles(roles: set[str]) -> None:
    unknown = roles - {choice.value for choice in Role}
    if unknown:
        raise ValueError(f"Unknown roles: {', '.join(sorted(unknown))}")


class MembershipRefused(ValueError):
    """The change would leave a tenant without an admin, or a team without a maintainer; the message says so."""


def _label(user) -> str:
    return getattr(user, "username", "") or "system"


def _record_access(*, member, action: str, by, tenant: Tenant | None = None, team: Team | None = None, **detail):
    return MembershipEvent.objects.create(
        tenant=tenant,
        team=team,
        member=member,
        member_label=_label(member),
        action=action,
        actor=by,
        actor_label=_label(by),
        detail=detail,
    )


@transaction.atomic
def set_member_roles(*, tenant: Tenant, user, roles: set[str], by=None) -> set[str]:
    """Make the user's roles in the tenant exactly `roles` (empty removes the member), audited.

    Never leaves the tenant without an admin: the tenant row is locked first, so two admins removing
    each other at once are serialised and the second is refused."""
    _check_roles(roles)
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
    before = set(Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True))
    if before == roles:
        return roles
    other_admins = Membership.objects.filter(tenant=tenant, role=Role.ADMIN).exclude(user=user)
    if Role.ADMIN in before and Role.ADMIN not in roles and not other_admins.exists():
        raise MembershipRefused(f"{user.username} is the last admin of {tenant.name}: make another member admin first.")
    Membership.objects.filter(tenant=tenant, user=user).exclude(role__in=roles).delete()
    for role in roles:
        Membership.objects.get_or_create(tenant=tenant, user=user, role=role)
    action = MembershipAction.ROLES_CHANGED if roles else MembershipAction.REMOVED
    _record_access(tenant=tenant, member=user, action=action, by=by, before=sorted(before), after=sorted(roles))
    return roles


def remove_member(*, tenant: Tenant, user, by) -> None:
    """Take every role of the user in the tenant away (refused for its last admin)."""
    set_member_roles(tenant=tenant, user=user, roles=set(), by=by)


def create_personal_token(
    *,
    user,
    name: str,
    scopes: Iterable[str] = (TokenScope.READ, TokenScope.APPROVE),
    expires_in: timedelta | None = None,
) -> tuple[PersonalAccessToken, str]:
    """A token with these scopes that stops working after `expires_in` (the configured default lifetime
    when None, never longer than AIRLOCK_TOKEN_MAX_DAYS); returned with its key, shown once."""
    scopes = sorted({TokenScope(scope).value for scope in scopes})
    if not scopes:
        raise ValueError("A token needs at least one scope.")
    lifetime = expires_in if expires_in is not None else timedelta(days=settings.AIRLOCK_TOKEN_DEFAULT_DAYS)
    if lifetime > timedelta(days=settings.AIRLOCK_TOKEN_MAX_DAYS):
        raise ValueError(f"A token lives at most {settings.AIRLOCK_TOKEN_MAX_DAYS} days.")
    now = timezone.now()
    token = PersonalAccessToken(user=user, name=name, scopes=scopes, created_at=now, expires_at=now + lifetime)
    key = token.issue_key()
    token.save()
    return token, key


def revoke_personal_token(*, token: PersonalAccessToken) -> PersonalAccessToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


# --- invitations -------------------------------------------------------------------------------
# An invitation is pending until exactly one of these ends it; each end is one conditional UPDATE
# from pending (see `_close`), so a double click, or an accept racing a revoke, has one winner.
INVITATION_ENDS = {"accepted": "accepted_at", "declined": "declined_at", "revoked": "revoked_at"}


class InvitationClosed(Exception):
    """The invitation was already accepted, declined, revoked, or has expired."""


def _record(invitation: Invitation, *, action: str, actor, detail: dict | None = None) -> InvitationEvent:
    return InvitationEvent.objects.create(
        tenant_id=invitation.tenant_id,
        invitation=invitation,
        action=action,
        actor=actor,
        actor_label=getattr(actor, "username", "") or "system",
        detail=detail or {},
    )


def _close(invitation: Invitation, *, end: str, **extra) -> bool:
    """End a pending invitation as `end`; False when it was no longer pending (ended or expired before)."""
    now = timezone.now()
    won = Invitation.objects.pending(now).filter(pk=invitation.pk).update(**{INVITATION_ENDS[end]: now}, **extra)
    invitation.refresh_from_db()
    return bool(won)


@transaction.atomic
def invite_member(*, tenant: Tenant, address: str, roles: set[str], invited_by) -> Invitation:
    """Invite an e-mail address or an exact username to the tenant with `roles`.

    Deliberately looks up no account: whether the address or username exists changes nothing here,
    so the admin's answer is the same either way. An e-mail address gets a mail with the accept link
    (sent after commit through EMAIL_BACKEND, failures ignored); a username is shown the invitation
    on their home page. A pending invitation of the same address to this tenant is replaced."""
    _check_roles(roles)
    if not roles:
        raise ValueError("An invitation needs at least one role.")
    address = address.strip()
    by_email = "@" in address
    invitation = Invitation(
        tenant=tenant,
        email=address.lower() if by_email else "",
        username="" if by_email else address,
        roles=sorted(roles),
        invited_by=invited_by,
        expires_at=timezone.now() + INVITATION_TTL,
    )
    token = invitation.issue_token()
    same = {"email": invitation.email} if by_email else {"username": invitation.username}
    older = list(Invitation.objects.pending().filter(tenant=tenant, **same))
    invitation.save()
    for previous in older:
        if _close(previous, end="revoked", revoked_by=invited_by):
            _record(previous, action="replaced", actor=invited_by, detail={"by_invitation": invitation.pk})
    _record(invitation, action="invited", actor=invited_by, detail={"roles": invitation.roles})
    if by_email:
        link = public_reverse("console:invitation_open", args=[token])  # under AIRLOCK_PUBLIC_URL
        transaction.on_commit(lambda: _mail_invitation(invitation, link))
    return invitation


def _mail_invitation(invitation: Invitation, link: str) -> None:
    inviter = invitation.invited_by.username if invitation.invited_by else "An admin"
    send_mail(
        subject=f"[Airlock] {inviter} invites you to {invitation.tenant.name}",
        message=(
            f"{inviter} invites you to join {invitation.tenant.name} on Airlock as "
            f"{', '.join(invitation.roles)}.\n\nSign in with the Airlock account that has this e-mail "
            f"address and accept or decline here:\n{link}\n\nThe invitation expires on "
            f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC. If you did not expect it, ignore this mail.\n"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[invitation.email],
        fail_silently=True,
    )


def revoke_invitation(*, invitation: Invitation, user) -> Invitation:
    """A tenant admin withdraws a pending invitation; InvitationClosed if it is no longer pending."""
    with transaction.atomic():
        if not _close(invitation, end="revoked", revoked_by=user):
            raise InvitationClosed(f"This invitation is already {invitation.status}.")
        _record(invitation, action="revoked", actor=user)
    return invitation


def accept_invitation(*, invitation: Invitation, user) -> Invitation:
    """The invitee accepts: only now do memberships exist (roles added to any the user already holds)."""
    with transaction.atomic():
        if not _close(invitation, end="accepted", accepted_by=user):
            raise InvitationClosed(f"This invitation is {invitation.status}.")
        tenant = invitation.tenant
        before = set(Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True))
        for role in invitation.roles:
            Membership.objects.get_or_create(tenant=tenant, user=user, role=role)
        _record(invitation, action="accepted", actor=user, detail={"roles": invitation.roles})
        after = before | set(invitation.roles)
        if after != before:
            action = MembershipAction.ROLES_CHANGED if before else MembershipAction.ADDED
            _record_access(
                tenant=tenant, member=user, action=action, by=user, before=sorted(before), after=sorted(after)
            )
    return invitation


def decline_invitation(*, invitation: Invitation, user) -> Invitation:
    with transaction.atomic():
        if not _close(invitation, end="declined"):
            raise InvitationClosed(f"This invitation is {invitation.status}.")
        _record(invitation, action="declined", actor=user)
    return invitation


# --- tenants and teams -------------------------------------------------------------------------
class SlugTaken(ValueError):
    """A new tenant or team names a slug another already has."""


def _require_platform_admin(user, what: str) -> None:
    if not (user.is_authenticated and user.is_superuser):
        raise PermissionDenied(f"Only a platform admin {what}.")


@transaction.atomic
def create_tenant(*, name: str, slug: str, first_admin: str, by) -> tuple[Tenant, Invitation]:
    """A platform admin creates a tenant and invites its first admin (an e-mail address or exact username),
    who becomes a member on accepting, as any invitee does."""
    _require_platform_admin(by, "creates tenants")
    slug_validator(slug)
    try:
        with transaction.atomic():  # a savepoint: the unique slug may be taken by a concurrent request
            tenant = Tenant.objects.create(name=name.strip(), slug=slug)
    except IntegrityError:
        raise SlugTaken(f"A tenant with the slug {slug} already exists.") from None
    _record_access(tenant=tenant, member=None, action=MembershipAction.CREATED, by=by, first_admin=first_admin)
    invitation = invite_member(tenant=tenant, address=first_admin, roles={Role.ADMIN}, invited_by=by)
    return tenant, invitation


@transaction.atomic
def create_team(*, name: str, slug: str, maintainer, by) -> Team:
    """A platform admin creates an owning team with its first maintainer."""
    _require_platform_admin(by, "creates teams")
    slug_validator(slug)
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name.strip(), slug=slug)
    except IntegrityError:
        raise SlugTaken(f"A team with the slug {slug} already exists.") from None
    _record_access(team=team, member=None, action=MembershipAction.CREATED, by=by)
    team.members.add(maintainer)
    team.maintainers.add(maintainer)
    _record_access(team=team, member=maintainer, action=MembershipAction.MAINTAINER_ADDED, by=by)
    return team


def _locked_team_for_maintainer(team: Team, by) -> Team:
    """The team, locked, if `by` maintains it once the lock is held (a concurrent change may have just
    taken their place away)."""
    team = Team.objects.select_for_update().get(pk=team.pk)
    if not team.is_maintained_by(by):
        raise PermissionDenied(f"Only the maintainers of {team.slug} change who is in it.")
    return team


@transaction.atomic
def add_teammate(*, team: Team, user, by) -> Team:
    """A maintainer (or a platform admin) adds someone to the team; adding a member again changes nothing."""
    team = _locked_team_for_maintainer(team, by)
    if not team.members.filter(pk=user.pk).exists():
        team.members.add(user)
        _record_access(team=team, member=user, action=MembershipAction.ADDED, by=by)
    return team


def _refuse_last_maintainer(team: Team, user) -> None:
    if team.maintainers.filter(pk=user.pk).exists() and not team.maintainers.exclude(pk=user.pk).exists():
        raise MembershipRefused(f"{user.username} is the last maintainer of {team.slug}: make another one first.")


@transaction.atomic
def remove_teammate(*, team: Team, user, by) -> Team:
    """A maintainer takes someone out of the team (never its last maintainer)."""
    team = _locked_team_for_maintainer(team, by)
    _refuse_last_maintainer(team, user)
    if team.members.filter(pk=user.pk).exists():
        team.maintainers.remove(user)
        team.members.remove(user)
        _record_access(team=team, member=user, action=MembershipAction.REMOVED, by=by)
    return team


@transaction.atomic
def set_maintainer(*, team: Team, user, maintainer: bool, by) -> Team:
    """Make a teammate a maintainer, or not (never the last one); only members can maintain."""
    team = _locked_team_for_maintainer(team, by)
    if not team.members.filter(pk=user.pk).exists():
        raise MembershipRefused(f"{user.username} is not in {team.slug}: add them to the team first.")
    is_maintainer = team.maintainers.filter(pk=user.pk).exists()
    if maintainer and not is_maintainer:
        team.maintainers.add(user)
        _record_access(team=team, member=user, action=MembershipAction.MAINTAINER_ADDED, by=by)
    elif not maintainer and is_maintainer:
        _refuse_last_maintainer(team, user)
        team.maintainers.remove(user)
        _record_access(team=team, member=user, action=MembershipAction.MAINTAINER_REMOVED, by=by)
    return team


# --- incident controls: suspend an agent, freeze a tenant ----------------------------------------
def record_operator_action(
    *, tenant: Tenant, action: str, target: str, by, reason: str = "", **detail
) -> OperatorAction:
    """One row of the incident audit log (a stop, a suspension, a freeze and their undoing)."""
    return OperatorAction.objects.create(
        tenant=tenant,
        action=action,
        target=target,
        reason=reason,
        actor=by,
        actor_label=by.get_username(),
        detail=detail,
    )


def suspend_agent(*, agent: Agent, by, reason: str, duration: timedelta | None = None) -> Agent:
    """Hold an agent for `duration` (None: until resumed). Its keys keep authenticating, so nothing needs
    re-issuing afterwards; the gate, the run start and every live check refuse it with `agent_suspended`,
    and its approved calls wait (runs.services.AgentSuspended). Suspending again replaces the window."""
    if duration is not None and not timedelta(0) < duration <= MAX_SUSPENSION:
        raise ValueError(f"A suspension lasts between a minute and {MAX_SUSPENSION.days} days.")
    now = timezone.now()
    fields = {
        "suspended_at": now,
        "suspended_until": now + duration if duration is not None else None,
        "suspended_by_label": by.get_username(),
        "suspend_reason": reason[:300],
    }
    with transaction.atomic():
        Agent.objects.filter(pk=agent.pk).update(**fields)
        for name, value in fields.items():
            setattr(agent, name, value)
        action = record_operator_action(
            tenant=agent.tenant,
            action=OperatorAction.Action.AGENT_SUSPENDED,
            target=agent.name,
            by=by,
            reason=reason[:300],
            until=agent.suspended_until.isoformat() if agent.suspended_until else None,
        )
        hooks.incident_control_applied(action=action, agent=agent)
    return agent


def resume_agent(*, agent: Agent, by) -> Agent:
    """Lift a suspension; the agent's held approved calls run at their next look (AIRLOCK_SUSPENDED_RECHECK_SECONDS)."""
    fields = {"suspended_at": None, "suspended_until": None, "suspended_by_label": "", "suspend_reason": ""}
    with transaction.atomic():
        if not Agent.objects.filter(pk=agent.pk, suspended_at__isnull=False).update(**fields):
            return agent
        for name, value in fields.items():
            setattr(agent, name, value)
        action = record_operator_action(
            tenant=agent.tenant, action=OperatorAction.Action.AGENT_RESUMED, target=agent.name, by=by
        )
        hooks.incident_control_applied(action=action, agent=agent)
    return agent


def freeze_tenant(*, tenant: Tenant, by, reason: str) -> Tenant:
    """Deny every call of the tenant whose effect is not a read (`tenant_frozen`) until it is unfrozen."""
    fields = {"frozen_at": timezone.now(), "frozen_by_label": by.get_username(), "freeze_reason": reason[:300]}
    with transaction.atomic():
        if not Tenant.objects.filter(pk=tenant.pk, frozen_at__isnull=True).update(**fields):
            tenant.refresh_from_db()
            return tenant  # frozen already: the first freeze and its reason stand
        for name, value in fields.items():
            setattr(tenant, name, value)
        action = record_operator_action(
            tenant=tenant, action=OperatorAction.Action.TENANT_FROZEN, target=tenant.slug, by=by, reason=reason[:300]
        )
        hooks.incident_control_applied(action=action, agent=None)
    return tenant


def unfreeze_tenant(*, tenant: Tenant, by) -> Tenant:
    fields = {"frozen_at": None, "frozen_by_label": "", "freeze_reason": ""}
    with transaction.atomic():
        if not Tenant.objects.filter(pk=tenant.pk, frozen_at__isnull=False).update(**fields):
            return tenant
        for name, value in fields.items():
            setattr(tenant, name, value)
        action = record_operator_action(
            tenant=tenant, action=OperatorAction.Action.TENANT_UNFROZEN, target=tenant.slug, by=by
        )
        hooks.incident_control_applied(action=action, agent=None)
    return tenant
