import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from lib.append_only import AppendOnlyModel

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,62}$", "Use lowercase letters, digits and hyphens.")


class Tenant(models.Model):
    """A customer organisation: its agents, runs, approvals and traces are invisible to other tenants."""

    slug = models.SlugField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    approval_ttl = models.DurationField(default=timedelta(hours=1))
    trace_retention = models.DurationField(default=timedelta(days=30))
    created_at = models.DateTimeField(default=timezone.now)
    # An incident freeze: while set, every call whose effect is not a read is denied (`tenant_frozen`).
    frozen_at = models.DateTimeField(null=True, blank=True)
    frozen_by_label = models.CharField(max_length=150, blank=True)
    freeze_reason = models.CharField(max_length=300, blank=True)
    default_context_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens of tool results a run's model is given before the oldest are replaced by summaries, "
        "for runs that set no context_budget of their own; empty for no budget.",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    APPROVER = "approver", "Approver"
    ADMIN = "admin", "Admin"
    # Reads the tenant's decision history and what it links to; changes nothing.
    AUDITOR = "auditor", "Auditor"


class Membership(models.Model):
    """One role a user holds in a tenant; a user holding several roles has several rows."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user", "role"], name="unique_role_per_member")]
        ordering = ["tenant__slug", "user__username", "role"]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.tenant.slug}"


class Team(models.Model):
    """A group of users that owns skills across every tenant (the skill owners)."""

    slug = models.SlugField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    email = models.EmailField(blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    # Members who add and remove teammates (console.services); always members themselves.
    maintainers = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="maintained_teams", blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def is_maintained_by(self, user) -> bool:
        """Whether `user` may change who is in this team: a maintainer, or a platform admin."""
        return user.is_authenticated and (user.is_superuser or self.maintainers.filter(pk=user.pk).exists())


KEY_PREFIX = "ak"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


LAST_USED_RESOLUTION = timedelta(minutes=1)
# How long an agent's replaced key keeps working after a rotation: the admin's choice, within these.
DEFAULT_KEY_GRACE = timedelta(hours=24)
MAX_KEY_GRACE = timedelta(days=30)
MAX_SUSPENSION = timedelta(days=30)  # a longer hold is a revocation


class BearerKeyMixin:
    """A secret `<prefix>_<lookup>_<secret>` key stored only as a hash: the lookup finds the row,
    the hash of the whole key proves possession. Subclasses set `key_prefix`."""

    key_prefix = ""

    def issue_key(self) -> str:
        """A fresh key; the caller must show it once, it is never stored."""
        self.key_lookup = secrets.token_hex(6)
        full_key = f"{self.key_prefix}_{self.key_lookup}_{secrets.token_urlsafe(32)}"
        self.key_hash = hash_key(full_key)
        return full_key

    def key_matches(self, full_key: str) -> bool:
        return secrets.compare_digest(self.key_hash, hash_key(full_key))

    def touch(self) -> None:
        """Record use at most once a minute, so authentication does not write on every request."""
        now = timezone.now()
        if self.last_used_at is None or now - self.last_used_at > LAST_USED_RESOLUTION:
            type(self).objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now


class AgentQuerySet(models.QuerySet):
    def active(self) -> "AgentQuerySet":
        return self.filter(revoked_at__isnull=True)


class Agent(BearerKeyMixin, models.Model):
    """A named agent identity in one tenant, authenticated by an API key stored only as a hash.

    Keys look like `ak_<lookup>_<secret>`: the lookup part finds the row, the hash of the
    whole key proves possession.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=64, help_text="The agent role that grants and policies refer to.")
    key_lookup = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    key_created_at = models.DateTimeField(default=timezone.now, help_text="When the current key was issued.")
    # The key a rotation replaced: it keeps working until previous_key_expires_at (the grace period the
    # admin chose; a cut-off moves it to the moment of the cut-off). Empty when there is none.
    previous_key_lookup = models.CharField(max_length=16, unique=True, null=True, blank=True)
    previous_key_hash = models.CharField(max_length=64, blank=True)
    previous_key_created_at = models.DateTimeField(null=True, blank=True)
    previous_key_expires_at = models.DateTimeField(null=True, blank=True)
    previous_key_last_used_at = models.DateTimeField(null=True, blank=True)
    # A suspension: the keys keep authenticating, but no run starts and no call executes for the agent
    # until `suspended_until` (None: until an admin resumes it). Revocation, by contrast, is for ever.
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspended_until = models.DateTimeField(null=True, blank=True)
    suspended_by_label = models.CharField(max_length=150, blank=True)
    suspend_reason = models.CharField(max_length=300, blank=True)

    key_prefix = KEY_PREFIX
    objects = AgentQuerySet.as_manager()
    # Which of its keys authenticated the request this instance was loaded for (console.api_auth sets
    # it); runs and traces record it, and the agent's signed snapshot names it as its audience.
    presented_key_lookup = ""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="unique_agent_name_per_tenant")]
        ordering = ["tenant__slug", "name"]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_suspended(self, at: datetime) -> bool:
        """Whether a suspension holds at `at` (a timed one lapses by itself)."""
        return self.suspended_at is not None and (self.suspended_until is None or at < self.suspended_until)

    @property
    def suspended_now(self) -> bool:
        return self.is_suspended(timezone.now())

    def suspension_notice(self) -> str:
        """What a refused agent is told: who suspended it, why, and until when."""
        until = (
            f"until {self.suspended_until:%Y-%m-%d %H:%M:%S} UTC"
            if self.suspended_until
            else "until an admin resumes it"
        )
        reason = f": {self.suspend_reason}" if self.suspend_reason else ""
        return f"{self.suspended_by_label or 'An admin'} suspended agent {self.name} {until}{reason}."

    @property
    def key_in_use(self) -> str:
        """The lookup of the key this request came with (the current key's when no key was presented)."""
        return self.presented_key_lookup or self.key_lookup

    def previous_key_live(self, at: datetime) -> bool:
        """Whether the key a rotation replaced still works at `at` (its grace period not over, not cut off)."""
        expires = self.previous_key_expires_at
        return bool(self.previous_key_lookup) and expires is not None and at < expires

    def key_standing(self, full_key: str, at: datetime) -> str:
        """What `full_key` is to this agent at `at`: "current", "previous" (replaced, in its grace period),
        "expired" (replaced, grace over or cut off) or "unknown". Revocation is the caller's other check."""
        if self.key_matches(full_key):
            return "current"
        if self.previous_key_lookup and secrets.compare_digest(self.previous_key_hash, hash_key(full_key)):
            return "previous" if self.previous_key_live(at) else "expired"
        return "unknown"

    def touch(self) -> None:
        """Record use of the key this request presented, at most once a minute per key."""
        if self.presented_key_lookup and self.presented_key_lookup == self.previous_key_lookup:
            now = timezone.now()
            used = self.previous_key_last_used_at
            if used is None or now - used > LAST_USED_RESOLUTION:
                Agent.objects.filter(pk=self.pk).update(previous_key_last_used_at=now)
                self.previous_key_last_used_at = now
            return
        super().touch()


class AgentKeyEvent(AppendOnlyModel):
    """The append-only audit log of agent keys: who rotated an agent's key, or cut its old key off, and when."""

    append_only_message = "The agent key audit log is append-only."

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="key_events")
    action = models.CharField(max_length=16)  # rotated, cut_off
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    detail = models.JSONField(default=dict, blank=True, help_text="Key lookups (never secrets) and the grace period.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.agent} {self.action}"


class OperatorAction(AppendOnlyModel):
    """The append-only audit log of incident controls: who stopped a run, suspended or resumed an agent,
    froze or unfroze a tenant, when and why (runs.services, console.services write it)."""

    append_only_message = "The operator action log is append-only."

    class Action(models.TextChoices):
        RUN_STOPPED = "run_stopped", "Run stopped"
        AGENT_SUSPENDED = "agent_suspended", "Agent suspended"
        AGENT_RESUMED = "agent_resumed", "Agent resumed"
        TENANT_FROZEN = "tenant_frozen", "Tenant frozen"
        TENANT_UNFROZEN = "tenant_unfrozen", "Tenant unfrozen"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="operator_actions")
    action = models.CharField(max_length=20, choices=Action.choices)
    target = models.CharField(max_length=200, help_text="The run id, the agent's name or the tenant's slug.")
    reason = models.CharField(max_length=300, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target}"


class TokenScope(models.TextChoices):
    """What a personal access token may do. `read`: safe (GET) requests of the human API. `approve`:
    decide approvals, and every other change the API lets the user's roles make; without it a token is
    read-only."""

    READ = "read", "Read"
    APPROVE = "approve", "Approve"


class PersonalAccessToken(BearerKeyMixin, models.Model):
    """A token a human approver creates to use the approver API from a chat bot or script.

    It always expires (`expires_at`) and carries scopes (TokenScope); console.api_auth refuses an
    expired token and a request outside the token's scopes."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100)
    key_lookup = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list, help_text="TokenScope values.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    key_prefix = "pat"

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user}: {self.name}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


INVITATION_TTL = timedelta(days=7)


class InvitationQuerySet(models.QuerySet):
    def pending(self, at=None) -> "InvitationQuerySet":
        """Not accepted, declined or revoked, and not expired: the only state an invitation leaves."""
        return self.filter(
            accepted_at__isnull=True,
            declined_at__isnull=True,
            revoked_at__isnull=True,
            expires_at__gt=at or timezone.now(),
        )

    def addressed_to(self, user) -> "InvitationQuerySet":
        """Invitations naming this account: its exact username, or the e-mail address a platform admin gave it."""
        if not user.is_authenticated:
            return self.none()
        match = models.Q(username=user.username)
        if user.email:
            match |= models.Q(email=user.email.strip().lower())
        return self.filter(match)


class Invitation(models.Model):
    """An offer of roles in a tenant, made by one of its admins to an e-mail address or an exact username.

    Nothing about the invitee is looked up when it is made (so the admin learns nothing about
    platform accounts); only the invitee's acceptance creates memberships. The token of the
    e-mailed link is stored as a hash. Transitions: console.services (accept, decline, revoke).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True, help_text="Lowercase; blank when the admin named a username.")
    username = models.CharField(max_length=150, blank=True, help_text="Exact; blank when invited by e-mail.")
    roles = models.JSONField(default=list, help_text="Role values granted on acceptance.")
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    declined_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(email="") & ~models.Q(username="")) | (~models.Q(email="") & models.Q(username="")),
                name="invitation_names_email_or_username",
            )
        ]

    def __str__(self) -> str:
        return f"{self.address} to {self.tenant.slug}"

    @property
    def address(self) -> str:
        """What the admin typed, and all the admin ever sees of the invitee until they accept."""
        return self.email or self.username

    @property
    def status(self) -> str:
        if self.accepted_at:
            return "accepted"
        if self.declined_at:
            return "declined"
        if self.revoked_at:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "pending"

    def issue_token(self) -> str:
        """A fresh token for the e-mailed link; shown once, stored as a hash."""
        token = secrets.token_urlsafe(32)
        self.token_hash = hash_key(token)
        return token


class InvitationEvent(AppendOnlyModel):
    """The append-only audit log of invitations: who invited, revoked, accepted or declined, and when."""

    append_only_message = "The invitation audit log is append-only."

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16)  # invited, replaced, revoked, accepted, declined
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.invitation.address} {self.action}"


class MembershipAction(models.TextChoices):
    CREATED = "created", "created"
    ROLES_CHANGED = "roles_changed", "roles changed"
    ADDED = "added", "added"
    REMOVED = "removed", "removed"
    MAINTAINER_ADDED = "maintainer_added", "made maintainer"
    MAINTAINER_REMOVED = "maintainer_removed", "no longer maintainer"


class MembershipEvent(AppendOnlyModel):
    """The append-only audit log of access: who changed whose roles in a tenant, or whose place in a team.

    Exactly one of `tenant` and `team` is set. Labels keep the names readable after a user is deleted."""

    append_only_message = "The membership audit log is append-only."

    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    member_label = models.CharField(max_length=150)
    action = models.CharField(max_length=24, choices=MembershipAction.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    detail = models.JSONField(default=dict, blank=True, help_text="Roles before and after, for a tenant.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(tenant__isnull=True) ^ models.Q(team__isnull=True),
                name="membership_event_names_tenant_or_team",
            )
        ]

    def __str__(self) -> str:
        return f"{self.member_label} {self.action}"


class GateGeneration(models.Model):
    """One row that the database bumps itself (triggers, policies/migrations/0002) on every change to
    what the gate keeps in process: grants, policies, policy versions and skill version statuses.

    A process's gate caches (runs/gate_cache.py) hold while (epoch, number) is unchanged; the gate reads
    both in the same query as the run, so a revoked grant or a retired version is seen on the next call.
    Each bump draws a new random epoch: a rolled-back bump, a flushed or a restored database never reuse one."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    epoch = models.CharField(max_length=36)
    number = models.BigIntegerField(default=1)


class UserPreference(models.Model):
    """One person's console display choices, kept on the server so that they follow them across browsers."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_preference")
    compact_inbox = models.BooleanField(
        default=False, help_text="The approvals inbox as a compact list (one line a request) instead of full cards."
    )

    def __str__(self) -> str:
        return f"preferences of {self.user}"
