"""Multi-step work: reconciliation items for unknown outcomes, long-running jobs, and pipelines run as sagas.

The execution plane's tables (MCP servers, credentials, breaker history) keep this app's label but their
classes live in `runs.plane.models`; they are imported here so that Django registers them with this app.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Tenant
from console.tenancy import TenantScopedQuerySet
from runs.plane.models import (  # noqa: F401 - registered under this app label, see the docstring
    BreakerTransition,
    Credential,
    CredentialAction,
    CredentialAudit,
    CredentialAuditQuerySet,
    CredentialBinding,
    CredentialBindingQuerySet,
    CredentialQuerySet,
    McpServer,
    McpServerAction,
    McpServerEvent,
    McpServerStatus,
    McpToolPin,
    McpTransport,
)


class ReconciliationReason(models.TextChoices):
    TIMEOUT = "timeout", "Timed out; outcome unknown"
    NO_INVERSE = "no_inverse", "Pipeline failed; no compensation declared"
    COMPENSATION_FAILED = "compensation_failed", "Pipeline compensation failed"


class ReconciliationStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class Resolution(models.TextChoices):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ReconciliationQuerySet(TenantScopedQuerySet):
    pass


class ReconciliationItem(models.Model):
    """A call whose effect nobody knows (or a saga step nobody can undo) until the tool or an owner says."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="reconciliation_items")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="reconciliation_items")
    call = models.ForeignKey("runs.ToolCall", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    skill_name = models.CharField(max_length=200, db_index=True)
    idempotency_key = models.CharField(max_length=300, blank=True)
    reason = models.CharField(max_length=24, choices=ReconciliationReason.choices)
    status = models.CharField(max_length=10, choices=ReconciliationStatus.choices, default=ReconciliationStatus.OPEN)
    resolution = models.CharField(max_length=10, choices=Resolution.choices, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_source = models.CharField(max_length=10, blank=True, help_text="tool or owner.")
    note = models.TextField(blank=True)
    checks = models.PositiveSmallIntegerField(default=0, help_text="How often the tool was asked.")
    last_check_at = models.DateTimeField(null=True, blank=True)
    last_check_error = models.CharField(max_length=300, blank=True)
    next_check_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = ReconciliationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["call", "reason"], name="one_item_per_call_and_reason")]

    def __str__(self) -> str:
        return f"reconcile {self.skill_name} ({self.get_reason_display()})"

    @property
    def is_open(self) -> bool:
        return self.status == ReconciliationStatus.OPEN


class JobStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    GAVE_UP = "gave_up"


def _callback_token() -> str:
    return secrets.token_urlsafe(24)


class LongJob(models.Model):
    """A long-running skill's job: the adapter answered with a job id, Airlock follows it to the end."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="long_jobs")
    call_id = models.CharField(max_length=200, help_text="The call (in the run) that started the job.")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    skill_name = models.CharField(max_length=200)
    job_id = models.CharField(max_length=300)
    result = models.JSONField(null=True, blank=True, help_text="The final result delivered to the run.")
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.RUNNING)
    checks = models.PositiveSmallIntegerField(default=0)
    next_check_at = models.DateTimeField(null=True, blank=True, db_index=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    callback_token = models.CharField(max_length=64, unique=True, default=_callback_token)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["run", "call_id"], name="one_job_per_call")]

    @property
    def is_running(self) -> bool:
        return self.status == JobStatus.RUNNING


class PipelineStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting", "Waiting on an approval"
    SUCCEEDED = "succeeded"
    COMPENSATED = "compensated", "Failed; compensated"
    FAILED = "failed", "Failed; needs reconciliation"


class PipelineQuerySet(TenantScopedQuerySet):
    pass


class Pipeline(models.Model):
    """An ordered list of skill calls run as a saga: on failure, completed steps are compensated."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="pipelines")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    pipeline_id = models.CharField(max_length=100, help_text="The agent's id, unique in the run.")
    status = models.CharField(max_length=12, choices=PipelineStatus.choices, default=PipelineStatus.PENDING)
    error = models.CharField(max_length=500, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = PipelineQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["run", "pipeline_id"], name="unique_pipeline_per_run")]


class StepStatus(models.TextChoices):
    PENDING = "pending"
    SKIPPED = "skipped", "Skipped (pre-condition false)"
    WAITING = "waiting", "Waiting on an approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    NO_INVERSE = "no_inverse", "Done; no compensation declared"
    NOT_RUN = "not_run"


class PipelineStep(models.Model):
    """One step of a pipeline: a skill call, its pre-conditions, its receipt and its compensation."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="steps")
    step_id = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=200, help_text="The skill to call.")
    sealed_arguments = models.TextField(help_text="The step's arguments, sealed until the pipeline ends.")
    preconditions = models.JSONField(default=list, blank=True)
    compensation = models.JSONField(null=True, blank=True, help_text="{name, arguments} or null.")
    status = models.CharField(max_length=20, choices=StepStatus.choices, default=StepStatus.PENDING)
    receipt = models.JSONField(null=True, blank=True, help_text="The gate's result for the step.")
    compensation_receipt = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["pipeline", "step_id"], name="unique_step_per_pipeline")]

    @property
    def call_id(self) -> str:
        return f"{self.pipeline.pipeline_id}:{self.step_id}"
