from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Team


class Effect(models.TextChoices):
    READ = "read"
    DRAFT = "draft"
    WRITE = "write"
    EXTERNAL = "external"
    DESTRUCTIVE = "destructive"


MUTATING_EFFECTS = {Effect.WRITE, Effect.EXTERNAL, Effect.DESTRUCTIVE}
EFFECT_RANK = {Effect.READ: 0, Effect.DRAFT: 1, Effect.WRITE: 2, Effect.EXTERNAL: 3, Effect.DESTRUCTIVE: 4}


class VersionStatus(models.TextChoices):
    DRAFT = "draft"
    IN_REVIEW = "in_review"
    ACTIVE = "active"
    DEPRECATED = "deprecated"
    RETIRED = "retired"


class Skill(models.Model):
    """A governed capability, known by its namespaced name; its behaviour lives in its versions."""

    skill_id = models.CharField(max_length=100, unique=True, help_text="Stable id, for example skl_search_docs.")
    name = models.CharField(max_length=200, unique=True, help_text="Namespaced, for example billing.create_refund.")
    namespace = models.CharField(max_length=100, db_index=True)
    owner_team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="skills")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SkillVersion(models.Model):
    """One version of a skill: its whole manifest. Immutable once published (status leaves draft)."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=64)
    major = models.PositiveIntegerField(default=0)
    minor = models.PositiveIntegerField(default=0)
    patch = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=VersionStatus.choices, default=VersionStatus.DRAFT)
    manifest = models.JSONField(help_text="The full manifest, validated against registry/manifest.schema.json.")
    effect = models.CharField(max_length=16, choices=Effect.choices)
    description = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    deprecated_at = models.DateTimeField(null=True, blank=True)
    sunset_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    replacement = models.ForeignKey(Skill, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["skill", "version"], name="unique_skill_version")]
        ordering = ["skill__name", "-major", "-minor", "-patch"]

    def __str__(self) -> str:
        return f"{self.skill.name}@{self.version}"


class Snapshot(models.Model):
    """An immutable, signed view of everything runtimes must see: skills, grants and policies."""

    number = models.PositiveBigIntegerField(unique=True)
    body = models.JSONField(help_text="The unsigned snapshot document.")
    canonical_sha256 = models.CharField(max_length=64)
    signature = models.TextField(help_text="Ed25519 signature (base64) over the RFC 8785 canonical JSON.")
    key_id = models.CharField(max_length=32)
    reason = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        get_latest_by = "number"

    def __str__(self) -> str:
        return f"snapshot {self.number}"
