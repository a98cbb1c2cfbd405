"""What makes calls fail well: MCP servers, tenant credentials, breaker history, reconciliation
items for unknown outcomes, long-running jobs, and pipelines run as sagas."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Tenant
from console.tenancy import TenantScopedQuerySet
from lib.sealing import seal, unseal
from policies.models import pattern_covers


class McpTransport(models.TextChoices):
    HTTP = "http", "Streamable HTTP"
    STDIO = "stdio", "stdio (local command)"


class McpServer(models.Model):
    """A registered MCP server reached by `mcp://<name>/<tool>` adapters.

    Connection settings (URL or command, headers with credentials) live here, sealed, so that
    manifests, snapshots and traces only ever name the server.
    """

    name = models.SlugField(max_length=63, unique=True)
    transport = models.CharField(max_length=8, choices=McpTransport.choices, default=McpTransport.HTTP)
    url = models.URLField(max_length=500, blank=True, help_text="Streamable HTTP endpoint, e.g. https://host/mcp.")
    command = models.CharField(max_length=500, blank=True, help_text="For stdio: the command line that starts it.")
    headers_sealed = models.TextField(blank=True, help_text="Extra HTTP headers (credentials), sealed.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_headers(self, headers: dict[str, str]) -> None:
        self.headers_sealed = seal(headers) if headers else ""

    def headers(self) -> dict[str, str]:
        return unseal(self.headers_sealed) if self.headers_sealed else {}


class CredentialQuerySet(TenantScopedQuerySet):
    pass


class Credential(models.Model):
    """A tenant's secret for a downstream service, referenced by name (`execution.credential`).

    Sealed at rest; attached by the adapter at execution only; never returned by any page or API.
    An empty `end_user` serves every end user; a row for one end user wins over it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="credentials")
    name = models.SlugField(max_length=100, help_text="The name manifests use, e.g. zendesk_token.")
    end_user = models.CharField(max_length=200, blank=True, help_text="Only for this end user (blank: all).")
    header = models.CharField(max_length=100, default="Authorization")
    scheme = models.CharField(max_length=30, default="Bearer", blank=True, help_text="Prefix, e.g. Bearer.")
    sealed_value = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    rotated_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = CredentialQuerySet.as_manager()

    class Meta:
        ordering = ["name", "end_user"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name", "end_user"], name="unique_credential")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"

    def header_value(self) -> str:
        value = unseal(self.sealed_value)
        return f"{self.scheme} {value}" if self.scheme else value


class CredentialBindingQuerySet(TenantScopedQuerySet):
    pass


class CredentialBinding(models.Model):
    """Where a tenant lets one of its credentials go: skills (a name, or `namespace.*`) at one endpoint.

    A credential is attached to a request only when a binding of the calling tenant covers both the
    skill's name and the endpoint the request goes to (`lib.endpoints.endpoint_of`: `https://host[:port]`,
    `mcp://server`, `python:module.function`). Skill owners cannot write these: tenant admins do,
    through `reliability.services`, and every change leaves a `CredentialAudit` row.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="credential_bindings")
    credential_name = models.SlugField(max_length=100)
    skill_pattern = models.CharField(max_length=200, help_text="customer.read_profile, or customer.* for a namespace.")
    endpoint = models.CharField(max_length=300, help_text="https://api.example.com[:port], mcp://server or python:f.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = CredentialBindingQuerySet.as_manager()

    class Meta:
        ordering = ["credential_name", "skill_pattern", "endpoint"]
        constraints = [models.UniqueConstraint(fields=["tenant", "credential_name", "skill_pattern", "endpoint"],
                                               name="unique_credential_binding")]

    def __str__(self) -> str:
        return f"{self.credential_name}: {self.skill_pattern} at {self.endpoint} ({self.tenant})"

    def covers(self, *, skill_name: str, endpoint: str) -> bool:
        return self.endpoint == endpoint and pattern_covers(self.skill_pattern, skill_name)


class CredentialAction(models.TextChoices):
    SAVED = "saved"
    ROTATED = "rotated"
    DELETED = "deleted"
    BOUND = "bound"
    UNBOUND = "unbound"


class CredentialAuditQuerySet(TenantScopedQuerySet):
    pass


class CredentialAudit(models.Model):
    """The append-only history of a tenant's credentials and bindings: who, when, what changed (never a value)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    credential_name = models.SlugField(max_length=100)
    action = models.CharField(max_length=16, choices=CredentialAction.choices)
    detail = models.JSONField(default=dict, blank=True, help_text="skill_pattern, endpoint, end_user, note.")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_label = models.CharField(max_length=200, help_text="Who acted, kept even if the user is deleted.")
    at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = CredentialAuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("The credential audit log is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("The credential audit log is append-only.")


class BreakerTransition(models.Model):
    """One state change of a circuit breaker, for the skill page and the owners' alert."""

    domain = models.CharField(max_length=300, db_index=True)
    skill_name = models.CharField(max_length=200, db_index=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    from_state = models.CharField(max_length=10)
    to_state = models.CharField(max_length=10)
    detail = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-at"]


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
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
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
