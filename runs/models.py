from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from console.models import Agent, Tenant
from console.tenancy import TenantScopedQuerySet
from lib.append_only import AppendOnlyError, AppendOnlyModel


class RunStatus(models.TextChoices):
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"  # a person stopped it (runs.services.stop_run); the agent cannot reopen it


class RunQuerySet(TenantScopedQuerySet):
    def of_agent(self, agent: Agent) -> RunQuerySet:
        """This agent's own runs, in its own tenant: what every agent-facing endpoint reads a run through.
        Another agent's run, of this tenant or another, reads exactly like one that does not exist."""
        return self.filter(agent=agent, tenant_id=agent.tenant_id)

    def of_agent_key(self, lookup: Any) -> RunQuerySet:
        """The same rule before the agent is known: the runs of the agent whose current or previous key
        has this lookup, in that agent's own tenant (the gate's one query, runs/api/batch_auth.py)."""
        return self.filter(
            Q(agent__key_lookup=lookup) | Q(agent__previous_key_lookup=lookup), tenant_id=F("agent__tenant_id")
        )


class Run(models.Model):
    """One agent run: an end user, a task, and the registry snapshot pinned at its start."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    end_user = models.CharField(max_length=200, help_text="Who the agent acts for; policies can test it.")
    end_user_roles = models.JSONField(default=list, blank=True)
    task = models.TextField(blank=True)
    callback_url = models.URLField(max_length=500, blank=True)
    webhook_secret = models.CharField(
        max_length=64, blank=True, help_text="HMAC key for callback deliveries, returned once when the run starts."
    )
    snapshot = models.ForeignKey("registry.Snapshot", on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    status_reason = models.CharField(max_length=300, blank=True)
    stopped_by_label = models.CharField(max_length=150, blank=True, help_text="Who stopped the run, if a person did.")
    tainted = models.BooleanField(default=False)
    taint_source = models.CharField(max_length=300, blank=True, help_text="Which call made the run tainted.")
    model = models.CharField(
        max_length=100, blank=True, help_text="The model the agent runs, as it names it; tokens are counted for it."
    )
    context_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens of tool results the model is given before the oldest are replaced by summaries.",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]

    def __str__(self) -> str:
        return f"run {self.id}"


class CallStatus(models.TextChoices):
    PROPOSED = "proposed"
    DENIED = "denied"
    INVALID = "invalid"
    AWAITING_APPROVAL = "awaiting_approval"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DECLINED = "declined"
    EXPIRED = "expired"
    TIMEOUT_UNKNOWN = "timeout_unknown"
    RECONCILED = "reconciled"


class Verdict(models.TextChoices):
    ALLOW = "allow"
    CONFIRM = "confirm"
    DENY = "deny"


class ToolCallQuerySet(TenantScopedQuerySet):
    tenant_field = "run__tenant"


class ToolCall(models.Model):
    """A call an agent proposed in a run, with the gate's verdict and the outcome."""

    # No index of its own: the unique (run, call_id) constraint begins with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="calls", db_index=False)
    call_id = models.CharField(max_length=200, help_text="The agent's id for the call, unique in the run.")
    position = models.PositiveIntegerField(default=0, help_text="Order within its batch.")
    name = models.CharField(max_length=200)
    requested_version = models.CharField(max_length=64, blank=True)
    skill_version = models.ForeignKey(
        "registry.SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    effect = models.CharField(max_length=16, blank=True)
    arguments = models.JSONField(default=dict, help_text="As stored after redaction.")
    sealed_arguments = models.TextField(
        blank=True,
        help_text="The raw arguments, encrypted (lib.sealing), kept only until the call reaches a final outcome.",
    )
    arguments_sha256 = models.CharField(max_length=64, blank=True)
    idempotency_key = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=20, choices=CallStatus.choices, default=CallStatus.PROPOSED)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    decision = models.JSONField(
        default=dict, blank=True, help_text="rule id, scope, policy version, reason, shadow verdicts."
    )
    error_class = models.CharField(max_length=32, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="The shaped result the agent received.")
    result_sha256 = models.CharField(max_length=64, blank=True)
    result_bytes = models.PositiveIntegerField(default=0)
    result_tokens = models.PositiveIntegerField(default=0, help_text="Tokens of the result as given to the model.")
    summarized_at = models.DateTimeField(
        null=True, blank=True, help_text="When the run's context budget replaced the result by its summary."
    )
    truncated = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    warnings = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="While executing: when the worker holding the call is presumed dead (runs.lifecycle).",
    )

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "call_id"], name="unique_call_id_per_run")]
        indexes = [
            models.Index(
                fields=["status", "lease_expires_at"], name="call_lease_idx", condition=models.Q(status="executing")
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.call_id})"


class StoredResultQuerySet(TenantScopedQuerySet):
    tenant_field = "run__tenant"


class StoredResult(models.Model):
    """A result longer than one answer, kept whole (redacted, before any view or cut) so that the model can
    read the rest page by page with the `next` handle it was given (runs.pagination). It lives as long as
    its run's record: retention deletes it with the run."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="stored_results")
    call_id = models.CharField(max_length=200, help_text="The call whose result this is.")
    skill_name = models.CharField(max_length=200)
    content = models.JSONField(help_text="The whole result, redacted.")
    provenance = models.JSONField(null=True, blank=True, help_text="Where it came from, as its first page said.")
    created_at = models.DateTimeField(default=timezone.now)

    objects = StoredResultQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.skill_name} ({self.call_id})"


class IdempotencyRecord(models.Model):
    """The first outcome for an idempotency key in a tenant, returned again for a repeat."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=300)
    arguments_sha256 = models.CharField(max_length=64)
    skill_name = models.CharField(max_length=200)
    call = models.ForeignKey(ToolCall, null=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="unique_idempotency_key")]


class RunEventQuerySet(TenantScopedQuerySet):
    tenant_field = "run__tenant"


class RunEvent(models.Model):
    """An append-only event an agent can follow: `GET /api/v1/runs/{id}/events?after=<id>`."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=40, help_text="approval.decided, call.completed, run.status, ...")
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RunEventQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"])]


class LocalDecisionQuerySet(TenantScopedQuerySet):
    tenant_field = "call__run__tenant"


class LocalDecision(models.Model):
    """A call the agent's SDK decided itself from its signed decision bundle while Airlock was unreachable,
    uploaded afterwards (runs.local_calls). Its ToolCall carries the outcome; this row says how it was decided
    and what today's policy thinks of it."""

    call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="local", primary_key=True)
    bundle_number = models.PositiveBigIntegerField(help_text="The decision bundle the SDK decided under.")
    decided_at = models.DateTimeField(help_text="When the SDK decided, by the agent's clock.")
    local_reason = models.CharField(max_length=300, blank=True, help_text="The reason the SDK gave.")
    content_sha256 = models.CharField(max_length=64, help_text="Hash of the upload; a repeat must match it.")
    uploaded_at = models.DateTimeField(default=timezone.now)
    flagged = models.BooleanField(default=False)
    flag_verdict = models.CharField(
        max_length=10, blank=True, help_text="What the policy answered on upload when it was not allow."
    )
    flag_reason = models.CharField(max_length=500, blank=True)

    objects = LocalDecisionQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["-decided_at"], name="local_flagged_idx", condition=models.Q(flagged=True)),
        ]

    def __str__(self) -> str:
        return f"{self.call} decided locally under bundle {self.bundle_number}"


LOCAL_FLAG_APPEND_ONLY = "The audit log of flagged local calls is append-only."


class LocalFlagEventQuerySet(TenantScopedQuerySet):
    """Reads of the audit log of flagged local calls. Bulk updates and deletes are refused; the one deliberate
    exception is `runs.local_audit` (redact when the run is deleted, delete after the audit period), through
    `retention_queryset()`. Cascades never reach it: its foreign keys are SET_NULL."""

    tenant_field = "tenant"

    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(LOCAL_FLAG_APPEND_ONLY)

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(LOCAL_FLAG_APPEND_ONLY)

    def bulk_update(self, *args: Any, **kwargs: Any) -> int:
        raise AppendOnlyError(LOCAL_FLAG_APPEND_ONLY)


class LocalFlagEvent(AppendOnlyModel):
    """The audit row of a call the SDK decided locally that the upload flagged (runs.local_review): written with
    the flag, chained like every audit log, and kept when retention deletes its run, as an approval's audit rows
    are. The row names its tenant, run, call, agent, skill, bundle and moment itself (kept fields); deleting the
    call sets `call` to NULL, `redacted_at` records when `runs.local_audit` reduced `detail` to identifiers,
    codes and hashes (the reasons are free text: hash markers), and `detached_at` when the row outlived its
    call, the start of its audit period (AIRLOCK_AUDIT_RETENTION_DAYS)."""

    call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    run_ref = models.UUIDField(help_text="The run's id, kept after it is deleted.")
    call_ref = models.CharField(max_length=200, help_text="The agent's call id in the run.")
    agent_ref = models.PositiveBigIntegerField(help_text="The agent's id, kept after it is deleted.")
    agent_label = models.CharField(max_length=100, help_text="The agent's name, kept after it is deleted.")
    skill_name = models.CharField(max_length=200)
    skill_version = models.CharField(max_length=64)
    bundle_number = models.PositiveBigIntegerField(help_text="The decision bundle the SDK decided under.")
    decided_at = models.DateTimeField(help_text="When the SDK decided, by the agent's clock.")
    flag_verdict = models.CharField(max_length=10, help_text="What the call was judged on upload: deny or confirm.")
    detail = models.JSONField(default=dict, blank=True)
    redacted_at = models.DateTimeField(null=True, blank=True, help_text="When retention redacted the detail.")
    detached_at = models.DateTimeField(
        null=True, blank=True, help_text="When the row outlived its call; its audit period counts from here."
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = LocalFlagEventQuerySet.as_manager()
    append_only_message = LOCAL_FLAG_APPEND_ONLY

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["detached_at"], name="local_flag_detached_idx", condition=models.Q(call__isnull=True))
        ]

    @classmethod
    def retention_queryset(cls) -> models.QuerySet:
        """A plain queryset that can update and delete: for `runs.local_audit` alone."""
        return models.QuerySet(model=cls)

    def __str__(self) -> str:
        return f"{self.skill_name} ({self.call_ref}) decided locally, flagged {self.flag_verdict}"
