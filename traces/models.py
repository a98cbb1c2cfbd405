from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Tenant
from console.tenancy import TenantScopedQuerySet


class TraceQuerySet(TenantScopedQuerySet):
    pass


class Trace(models.Model):
    """One trace per agent run (or per trace id an agent sends through ingest)."""

    trace_id = models.CharField(max_length=32, help_text="32 hex characters, as in W3C trace context.")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="traces")
    run = models.OneToOneField("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="trace")
    agent = models.ForeignKey("console.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    end_user = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=300, blank=True)
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    span_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)

    objects = TraceQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        constraints = [models.UniqueConstraint(fields=["tenant", "trace_id"], name="unique_trace_per_tenant")]
        indexes = [models.Index(fields=["tenant", "-started_at"])]

    def __str__(self) -> str:
        return self.trace_id

    @property
    def duration_ms(self) -> float | None:
        if self.ended_at is None:
            return None
        return max((self.ended_at - self.started_at).total_seconds() * 1000, 0.0)


class SpanKind(models.TextChoices):
    RUN = "run"
    MODEL_TURN = "model_turn"
    TOOL_CALL = "tool_call"
    POLICY = "policy"
    APPROVAL = "approval"
    APPROVAL_REQUEST = "approval_request"
    APPROVAL_DECISION = "approval_decision"
    EXECUTION_ATTEMPT = "execution_attempt"
    OTHER = "other"


class SpanQuerySet(TenantScopedQuerySet):
    tenant_field = "trace__tenant"


class Span(models.Model):
    """One step on a trace's timeline. Payloads are redacted before they are stored."""

    # No index of its own for `trace` or `skill_name`: the indexes below begin with each. Every index is
    # written on every call the gate records.
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="spans", db_index=False)
    span_id = models.CharField(max_length=16, help_text="16 hex characters.")
    parent_span_id = models.CharField(max_length=16, blank=True)
    kind = models.CharField(max_length=24, choices=SpanKind.choices)
    name = models.CharField(max_length=300)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    skill_name = models.CharField(max_length=200, blank=True)
    skill_version = models.CharField(max_length=64, blank=True)
    call = models.ForeignKey("runs.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="spans")
    verdict = models.CharField(max_length=10, blank=True)
    outcome = models.CharField(max_length=32, blank=True)
    error_class = models.CharField(max_length=32, blank=True)
    arguments_sha256 = models.CharField(max_length=64, blank=True, help_text="Finds repeated identical calls.")
    result_bytes = models.PositiveIntegerField(default=0)
    attributes = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, default="airlock", help_text="airlock, batch or otlp.")

    objects = SpanQuerySet.as_manager()

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [models.UniqueConstraint(fields=["trace", "span_id"], name="unique_span_per_trace")]
        indexes = [
            models.Index(fields=["skill_name", "started_at"]),
            models.Index(fields=["trace", "started_at", "id"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class TraceSettings(models.Model):
    """A tenant's trace options: forwarding a copy of its spans to an external OTLP endpoint."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="trace_settings")
    forward_endpoint = models.URLField(
        max_length=500, blank=True, help_text="OTLP/HTTP traces URL, for example https://collector:4318/v1/traces."
    )
    forward_headers_sealed = models.TextField(blank=True, help_text="Extra headers (credentials), sealed.")
    forward_enabled = models.BooleanField(default=False)
    forwarded_up_to = models.BigIntegerField(default=0, help_text="Highest span row id already forwarded.")
    last_forward_at = models.DateTimeField(null=True, blank=True)
    last_forward_error = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"trace settings of {self.tenant}"


class AlertKind(models.TextChoices):
    ERROR_RATE = "error_rate", "Error rate over threshold"
    REPEATED_CALLS = "repeated_calls", "Identical calls repeated in one run"
    CONTRACT_VIOLATIONS = "contract_violations", "Results violating the output contract"


class AlertRule(models.Model):
    """A rule a skill's owners set on their skill; evaluated by Celery beat over every tenant."""

    skill_name = models.CharField(max_length=200, db_index=True)
    kind = models.CharField(max_length=24, choices=AlertKind.choices)
    threshold = models.FloatField(help_text="Error rate (0-1), repeat count, or violation count.")
    window = models.DurationField(default=timedelta(hours=1))
    min_calls = models.PositiveIntegerField(default=10, help_text="Error rate rules ignore windows with fewer calls.")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["skill_name", "kind"]

    def __str__(self) -> str:
        return f"{self.skill_name}: {self.get_kind_display()} > {self.threshold}"


class Alert(models.Model):
    """One firing of a rule for one window; the dedupe key makes a second evaluation a no-op."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    skill_name = models.CharField(max_length=200, db_index=True)
    dedupe_key = models.CharField(max_length=200, unique=True)
    value = models.FloatField()
    message = models.CharField(max_length=500)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    fired_at = models.DateTimeField(default=timezone.now, db_index=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-fired_at"]

    def __str__(self) -> str:
        return self.message
