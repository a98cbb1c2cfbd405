from datetime import timedelta

from airlock_sdk.policy.permission import pattern_covers
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from console.models import Tenant
from console.tenancy import TenantScopedQuerySet, tenants_for
from lib.append_only import AppendOnlyModel
from registry.models import Skill


class GrantQuerySet(TenantScopedQuerySet):
    def active(self, at=None) -> "GrantQuerySet":
        at = at or timezone.now()
        return self.filter(revoked_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=at))


class Grant(models.Model):
    """Which skills (one name, or a namespace wildcard like `billing.*`) an agent role of a tenant may use.

    No grant, no access: the gate denies any call no active grant covers.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="grants")
    skill_pattern = models.CharField(max_length=200, help_text="billing.create_refund, or billing.* for a namespace.")
    agent_role = models.CharField(max_length=64)
    oauth_scopes = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField(default=timezone.now)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = GrantQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "agent_role", "skill_pattern"]
        indexes = [models.Index(fields=["tenant", "agent_role"])]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.agent_role} -> {self.skill_pattern}"

    def covers(self, skill_name: str) -> bool:
        return pattern_covers(self.skill_pattern, skill_name)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())


class GrantAction(models.TextChoices):
    GRANTED = "granted", "Granted"
    REVOKED = "revoked", "Revoked"


class GrantEvent(AppendOnlyModel):
    """The change log of a tenant's grants: who granted or revoked what, when and why (the reason asked
    for on revocation). The grant's pattern, role and id are kept on the row, so that it outlives the grant."""

    append_only_message = "The grant change log is append-only."

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    grant = models.ForeignKey(Grant, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    grant_ref = models.PositiveBigIntegerField(help_text="The grant's id, kept after it is deleted.")
    action = models.CharField(max_length=16, choices=GrantAction.choices)
    skill_pattern = models.CharField(max_length=200)
    agent_role = models.CharField(max_length=64)
    reason = models.CharField(max_length=500, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    detail = models.JSONField(default=dict, blank=True, help_text="OAuth scopes and expiry as granted.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["grant_ref", "created_at"], name="grant_event_grant_idx")]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.skill_pattern} to {self.agent_role}"


class Scope(models.TextChoices):
    PLATFORM = "platform"
    TENANT = "tenant"
    SKILL = "skill"


class PolicyQuerySet(models.QuerySet):
    def editable_by(self, user) -> "PolicyQuerySet":
        """Platform admins edit all; tenant admins their tenant's; owning teams their skills'."""
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self.all()

        owned = Skill.objects.filter(owner_team__members=user).values("name")
        return self.filter(
            Q(scope=Scope.TENANT, tenant__in=tenants_for(user, "admin")) | Q(scope=Scope.SKILL, skill_name__in=owned)
        )


class Policy(models.Model):
    """A named, ordered list of rules at one scope. Its content lives in versions."""

    name = models.CharField(max_length=200)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="policies")
    skill_name = models.CharField(max_length=200, blank=True, help_text="For skill scope: the skill it governs.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = PolicyQuerySet.as_manager()

    class Meta:
        ordering = ["scope", "name"]
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.scope_label}: {self.name}"

    @property
    def scope_label(self) -> str:
        if self.scope == Scope.TENANT:
            return f"tenant {self.tenant.slug}"
        if self.scope == Scope.SKILL:
            return f"skill {self.skill_name}"
        return "platform"

    def applies_to(self, *, tenant_id: int, skill_name: str) -> bool:
        if self.scope == Scope.TENANT:
            return self.tenant_id == tenant_id
        if self.scope == Scope.SKILL:
            return self.skill_name == skill_name
        return True


class VersionStatus(models.TextChoices):
    DRAFT = "draft"
    SHADOW = "shadow"
    PUBLISHED = "published"
    SUPERSEDED = "superseded"


class PolicyVersion(models.Model):
    """One version of a policy's rules: `[{"id", "verdict", "condition", "reason"}]` (plus `"override_taint":
    true` on a platform allow rule that lowers the taint floor), immutable once it leaves draft. At most one
    published and one shadow version per policy at a time."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=VersionStatus.choices, default=VersionStatus.DRAFT)
    rules = models.JSONField(default=list)
    note = models.CharField(max_length=300, blank=True)
    rolled_back_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["policy_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["policy", "number"], name="unique_policy_version")]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"policy {self.policy_id} v{self.number}"


class PolicyTest(models.Model):
    """A test case an owner attaches to a policy: a call and the verdict the policy must give it.

    `call` holds the context fields (skill, args, agent, end_user, tenant, run) that differ from
    the defaults in `policies.engine.sample_context`.
    """

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="tests")
    name = models.CharField(max_length=200)
    call = models.JSONField(default=dict)
    expected_verdict = models.CharField(
        max_length=10, choices=[("allow", "allow"), ("confirm", "confirm"), ("deny", "deny")]
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["policy_id", "name"]

    def __str__(self) -> str:
        return self.name


class LocalDecisionSettings(models.Model):
    """A tenant's opt-in to local decisions (docs/sdk.md): the agent roles whose SDK may decide calls of
    client-executed skills from a signed decision bundle while Airlock is unreachable, and how long one
    bundle holds (capped by AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS). No row: no role, ten minutes."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="local_decision_settings")
    agent_roles = models.JSONField(default=list, blank=True)
    bundle_validity = models.DurationField(default=timedelta(minutes=10))
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by_label = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return f"local decisions of {self.tenant.slug}: {', '.join(self.agent_roles) or 'none'}"


class IssuedBundle(models.Model):
    """The last decision bundle signed for an agent: its number only grows, by one each time its content
    changes (a new window of validity counts as a change). Every number is kept too: IssuedBundleNumber."""

    agent = models.OneToOneField("console.Agent", on_delete=models.CASCADE, related_name="issued_bundle")
    number = models.PositiveBigIntegerField(default=0)
    content_sha256 = models.CharField(max_length=64, blank=True)
    issued_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"bundle {self.number} of agent {self.agent_id}"


class IssuedBundleNumber(models.Model):
    """One decision bundle number as signed for an agent: the window it holds for, whether it let the agent's
    role decide locally, and the snapshot it was built from. An upload of calls decided locally is judged
    against the bundle each call names (runs.local_calls): decided past `valid_until`, or under a bundle that
    did not opt the role in, it is flagged."""

    agent = models.ForeignKey("console.Agent", on_delete=models.CASCADE, related_name="issued_bundle_numbers")
    number = models.PositiveBigIntegerField()
    issued_at = models.DateTimeField(help_text="The start of its window of validity.")
    valid_until = models.DateTimeField()
    local_decisions = models.BooleanField(help_text="Whether it let the agent's role decide locally.")
    snapshot_number = models.PositiveBigIntegerField(help_text="The snapshot its skills were read from.")
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="unique_issued_bundle_number")]

    def __str__(self) -> str:
        return f"bundle {self.number} of agent {self.agent_id}, valid until {self.valid_until:%Y-%m-%d %H:%M:%S}"
