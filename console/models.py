import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,62}$", "Use lowercase letters, digits and hyphens.")


class Tenant(models.Model):
    """A customer organisation: its agents, runs, approvals and traces are invisible to other tenants."""

    slug = models.SlugField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    approval_ttl = models.DurationField(default=timedelta(hours=1))
    trace_retention = models.DurationField(default=timedelta(days=30))
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    APPROVER = "approver", "Approver"
    ADMIN = "admin", "Admin"


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

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


KEY_PREFIX = "ak"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


LAST_USED_RESOLUTION = timedelta(minutes=1)


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

    key_prefix = KEY_PREFIX
    objects = AgentQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="unique_agent_name_per_tenant")]
        ordering = ["tenant__slug", "name"]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class PersonalAccessToken(BearerKeyMixin, models.Model):
    """A token a human approver creates to use the approver API from a chat bot or script."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100)
    key_lookup = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    key_prefix = "pat"

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user}: {self.name}"

