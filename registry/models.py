from django.conf import settings
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import connection, models
from django.utils import timezone

from console.models import Team
from console.tenancy import TenantScopedQuerySet


class Effect(models.TextChoices):
    READ = "read"
    DRAFT = "draft"
    WRITE = "write"
    EXTERNAL = "external"
    DESTRUCTIVE = "destructive"


MUTATING_EFFECTS = {Effect.WRITE, Effect.EXTERNAL, Effect.DESTRUCTIVE}
EFFECT_RANK = {Effect.READ: 0, Effect.DRAFT: 1, Effect.WRITE: 2, Effect.EXTERNAL: 3, Effect.DESTRUCTIVE: 4}


class DataClassification(models.TextChoices):
    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"


class ImmutableVersionError(Exception):
    """Raised when code tries to change the manifest of a published skill version."""


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

    def is_owned_by(self, user) -> bool:
        """Owning-team members and platform admins may publish, deprecate and retire."""
        if not user.is_authenticated:
            return False
        return user.is_superuser or self.owner_team.members.filter(pk=user.pk).exists()


LIFECYCLE_MANIFEST_KEYS = ("status", "compatibility")
PUBLISHED_STATUSES = {VersionStatus.ACTIVE, VersionStatus.DEPRECATED, VersionStatus.RETIRED}
# A version in review is frozen too: the reviewer approves exactly what they were shown.
FROZEN_STATUSES = PUBLISHED_STATUSES | {VersionStatus.IN_REVIEW}


class SkillVersionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        if "manifest" in kwargs and self.exclude(status=VersionStatus.DRAFT).exists():
            raise ImmutableVersionError("Published skill versions are immutable; create a new draft version.")
        return super().update(**kwargs)

    def published(self) -> "SkillVersionQuerySet":
        return self.filter(status__in=PUBLISHED_STATUSES)


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
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    deprecated_at = models.DateTimeField(null=True, blank=True)
    sunset_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    replacement = models.ForeignKey(Skill, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    data_classification = models.CharField(
        max_length=16, choices=DataClassification.choices, default=DataClassification.INTERNAL
    )
    review_reasons = models.JSONField(
        default=list, blank=True, help_text="Why this version needs a second person's review, if it does."
    )
    search_text = models.TextField(blank=True, help_text="Name, namespace and description, for discovery.")
    search_vector = SearchVectorField(
        null=True, editable=False, help_text="PostgreSQL only: tsvector of search_text (GIN-indexed)."
    )
    imported_from = models.JSONField(
        default=dict, blank=True, help_text="For MCP imports: server, tool and the annotations the defaults came from."
    )
    defaults_confirmed = models.BooleanField(
        default=True, help_text="False for imported drafts until an owner confirms the risk defaults."
    )

    objects = SkillVersionQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["skill", "version"], name="unique_skill_version")]
        ordering = ["skill__name", "-major", "-minor", "-patch"]

    def __str__(self) -> str:
        return f"{self.skill.name}@{self.version}"

    def save(self, *args, **kwargs) -> None:
        loaded_status = getattr(self, "_loaded_status", None)
        if loaded_status in FROZEN_STATUSES and (
            (self._loaded_manifest is not None and self.manifest != self._loaded_manifest)
            or self.version != self._loaded_version
        ):
            raise ImmutableVersionError(f"{self} is published and immutable; create a new draft version instead.")
        self.search_text = " ".join(
            [self.skill.name, self.skill.name.replace(".", " ").replace("_", " "), self.description]
        )
        super().save(*args, **kwargs)
        if connection.vendor == "postgresql":
            refresh_search_vectors(SkillVersion.objects.filter(pk=self.pk))
        self._loaded_status = self.status
        self._loaded_manifest = self.manifest
        self._loaded_version = self.version

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        loaded = dict(zip(field_names, values, strict=False))
        instance._loaded_status = loaded.get("status")
        instance._loaded_manifest = instance.manifest if "manifest" in loaded else None
        instance._loaded_version = loaded.get("version")
        return instance

    @property
    def is_published(self) -> bool:
        return self.status in PUBLISHED_STATUSES

    @property
    def semver(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def effective_manifest(self) -> dict:
        """The stored (immutable) manifest with its lifecycle fields filled from this row."""
        manifest = dict(self.manifest)
        manifest["status"] = self.status
        manifest["compatibility"] = {
            "deprecated_at": self.deprecated_at.isoformat() if self.deprecated_at else None,
            "replacement_skill_id": self.replacement.skill_id if self.replacement_id else None,
            "sunset_at": self.sunset_at.isoformat() if self.sunset_at else None,
        }
        return manifest


class ClaimStatus(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"


NAMESPACE_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*(\.[a-z][a-z0-9]*(_[a-z0-9]+)*)*$"


class NamespaceClaim(models.Model):
    """A team's claim on a namespace and the namespaces under it (`support` covers `support.email`).

    Once a platform admin approves it (or assigns it), only the team's members create skills there; the
    most specific approved claim decides. A namespace nobody has claimed takes a platform review for its
    first skill (`registry.namespaces`).
    """

    namespace = models.CharField(max_length=100, unique=True)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="namespace_claims")
    status = models.CharField(max_length=16, choices=ClaimStatus.choices, default=ClaimStatus.REQUESTED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["namespace"]

    def __str__(self) -> str:
        return f"{self.namespace} ({self.team.slug}, {self.status})"


def refresh_search_vectors(queryset: models.QuerySet) -> None:
    """Recompute the full-text vectors (PostgreSQL); bulk loaders call it once after bulk_create."""
    if connection.vendor == "postgresql":
        queryset.update(search_vector=SearchVector("search_text", config="english"))


class DiscoveryQueryQuerySet(TenantScopedQuerySet):
    tenant_field = "agent__tenant"  # the searching agent's tenant: its words are that tenant's data


class DiscoveryQuery(models.Model):
    """A discovery search that found nothing or little: the retrieval misses that hide the right tool."""

    query = models.CharField(max_length=300)
    namespace = models.CharField(max_length=100, blank=True)
    result_count = models.PositiveIntegerField()
    fell_back_to_namespace = models.BooleanField(default=False)
    agent = models.ForeignKey("console.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = DiscoveryQueryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.query!r} -> {self.result_count}"


class DiscoveryEvaluation(models.Model):
    """The latest discovery figures of one namespace on one labelled catalog (manage.py evaluate_discovery)."""

    catalog = models.CharField(max_length=40, help_text="Which labelled catalog: demo or generated.")
    namespace = models.CharField(max_length=100)
    database = models.CharField(max_length=20, help_text="The database it ran on: SQLite or PostgreSQL.")
    intents = models.PositiveIntegerField()
    recall_at_1 = models.FloatField()
    recall_at_5 = models.FloatField()
    mrr = models.FloatField()
    p95_ms = models.FloatField()
    leaks = models.PositiveIntegerField(help_text="Results the permission oracle forbids; must be 0.")
    evaluated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "namespace"], name="one_evaluation_per_namespace")]
        ordering = ["namespace", "catalog"]

    def __str__(self) -> str:
        return f"{self.catalog}/{self.namespace}: recall@5 {self.recall_at_5:.2f}"


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


# --- staged rollout (registry.rollouts) ---------------------------------------------------------


class RolloutState(models.TextChoices):
    STAGED = "staged"
    PROMOTED = "promoted"
    ROLLED_BACK = "rolled_back"


class Rollout(models.Model):
    """How far one published version reaches: a stage (canary tenants, or a share of runs) before everyone,
    everyone once promoted, nobody new once rolled back. One row per version, changed in place; at most one
    staged version per skill. Written only by `registry.rollouts`; runtimes read it from the snapshot."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="rollouts")
    version = models.OneToOneField(SkillVersion, on_delete=models.CASCADE, related_name="rollout")
    baseline = models.ForeignKey(
        SkillVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The version everyone outside the stage keeps, and gets again after a rollback.",
    )
    tenants = models.ManyToManyField("console.Tenant", blank=True, related_name="+")
    percent = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Share of runs, 1 to 99.")
    state = models.CharField(max_length=16, choices=RolloutState.choices, default=RolloutState.STAGED)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["skill"], condition=models.Q(state="staged"), name="one_staged_version_per_skill"
            )
        ]

    def __str__(self) -> str:
        return f"{self.version} ({self.state})"


class RolloutAction(models.TextChoices):
    ROLLOUT = "rollout"
    PROMOTE = "promote"
    ROLLBACK = "rollback"


class RolloutEvent(models.Model):
    """The audit of staged rollouts: who rolled out, promoted or rolled back which version, when, to whom."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="rollout_events")
    version = models.CharField(max_length=64)
    action = models.CharField(max_length=16, choices=RolloutAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tenants = models.JSONField(default=list, blank=True, help_text="Canary tenants' slugs, for a rollout.")
    percent = models.PositiveSmallIntegerField(null=True, blank=True)
    baseline = models.CharField(max_length=64, blank=True, help_text="The version everyone else is on.")
    snapshot_number = models.PositiveBigIntegerField(help_text="The snapshot that made it live.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.action} {self.skill_id}@{self.version}"


class EvaluationSetQuerySet(models.QuerySet):
    def visible_to(self, user) -> "EvaluationSetQuerySet":
        """A team's labelled intents are its own: its members and platform admins see them, nobody else."""
        if not user.is_authenticated:
            return self.none()
        return self if user.is_superuser else self.filter(team__members=user)


class EvaluationSet(models.Model):
    """An owning team's labelled intents for one of its namespaces: what users type, and the skill they meant."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="evaluation_sets")
    namespace = models.CharField(max_length=100)
    name = models.CharField(max_length=80)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = EvaluationSetQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="one_evaluation_set_name")]
        ordering = ["namespace", "name"]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class IntentSource(models.TextChoices):
    UPLOAD = "upload"
    SEARCH = "search", "a recorded zero-result search"


class LabelledIntent(models.Model):
    """One request as a user phrased it and the skills that should answer it, best first."""

    evaluation_set = models.ForeignKey(EvaluationSet, on_delete=models.CASCADE, related_name="intents")
    intent = models.CharField(max_length=300)
    expected = models.JSONField(help_text='Skill names, for example ["billing.create_refund_request"].')
    line = models.PositiveIntegerField(null=True, blank=True, help_text="Its line in the uploaded file.")
    source = models.CharField(max_length=16, choices=IntentSource.choices, default=IntentSource.UPLOAD)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["line", "pk"]

    def __str__(self) -> str:
        return f"{self.intent!r} -> {self.expected}"


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class OwnerEvaluation(models.Model):
    """One run of an owner's labelled set against the current catalog; the runs of a set are its history."""

    evaluation_set = models.ForeignKey(EvaluationSet, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    snapshot_number = models.PositiveBigIntegerField(null=True, blank=True)
    intents = models.PositiveIntegerField(default=0)
    recall_at_1 = models.FloatField(null=True, blank=True)
    recall_at_5 = models.FloatField(null=True, blank=True)
    mrr = models.FloatField(null=True, blank=True)
    leaks = models.PositiveIntegerField(null=True, blank=True, help_text="Results nobody may discover; must be 0.")
    misses = models.JSONField(default=list, blank=True, help_text="Intents whose expected skill was not first.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.evaluation_set} {self.status} at {self.created_at:%Y-%m-%d %H:%M}"


# --- owners' tries and skill tests (registry.trials, runs.trials) --------------------------------


class TryOutcome(models.TextChoices):
    OK = "ok"
    INVALID = "invalid"  # the arguments failed the input schema: nothing was called
    ERROR = "error"  # the target answered with a typed error, or the result broke output_schema
    NOT_RUN = "not_run"  # the ruling did not let it run (a deny, a refusal, a confirm without a sandbox)


class SkillTry(models.Model):
    """One owner's call of a version against its sandbox (or, for a read, its real target): never a run's
    call, so it counts in no production figure. Arguments and result are stored redacted and shaped."""

    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="tries")
    tried_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tenant = models.ForeignKey(
        "console.Tenant",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Whose grants and policies gave the verdict; empty: no tenant.",
    )
    agent_role = models.CharField(max_length=64, blank=True)
    target = models.CharField(max_length=500, help_text="The adapter actually called (the sandbox, or a read's own).")
    via = models.CharField(max_length=16, help_text="console, api or test.")
    arguments = models.JSONField(default=dict)
    outcome = models.CharField(max_length=16, choices=TryOutcome.choices)
    error_code = models.CharField(max_length=64, blank=True)
    verdict = models.CharField(max_length=16, blank=True)
    result = models.JSONField(null=True, blank=True)
    why = models.JSONField(default=dict, help_text="Validation, verdict, target and shaping, for the why panel.")
    span = models.JSONField(default=dict, help_text="Timing and attempts of the execution.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"try of {self.version} by {self.tried_by_id}: {self.outcome}"


class SkillTestRun(models.Model):
    """The outcome of a version's manifest `tests` for one manifest: publishing needs a passing one."""

    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="test_runs")
    manifest_sha256 = models.CharField(max_length=64)
    trigger = models.CharField(max_length=16, help_text="publish, console or command.")
    ran_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    passed = models.BooleanField()
    results = models.JSONField(default=list, help_text="One {name, passed, failures} per test, in manifest order.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"tests of {self.version}: {'passed' if self.passed else 'failed'}"

    @property
    def failures(self) -> list[dict]:
        return [result for result in self.results if not result["passed"]]
