from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Tenant
from console.tenancy import TenantScopedQuerySet


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"


class ApprovalRequestQuerySet(TenantScopedQuerySet):
    def pending(self) -> "ApprovalRequestQuerySet":
        return self.filter(status=ApprovalStatus.PENDING)


class ApprovalRequest(models.Model):
    """A confirm verdict waiting for a person, bound to the exact arguments and policy version."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approval_requests")
    call = models.OneToOneField("runs.ToolCall", on_delete=models.CASCADE, related_name="approval")
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING,
                              db_index=True)
    action = models.JSONField(help_text="skill, version, effect, data class and the exact arguments.")
    arguments_sha256 = models.CharField(max_length=64)
    policy_version = models.CharField(max_length=64, blank=True)
    rule_id = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)
    taint_source = models.CharField(max_length=300, blank=True)
    context = models.JSONField(default=dict, help_text="agent, end user, task, recent steps.")
    required_approvals = models.PositiveSmallIntegerField(default=1)
    edited_arguments = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decline_reason = models.TextField(blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    outcome = models.JSONField(null=True, blank=True)

    objects = ApprovalRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "status", "-created_at"])]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.status})"


class ApprovalEventQuerySet(TenantScopedQuerySet):
    tenant_field = "request__tenant"


class ApprovalEvent(models.Model):
    """The append-only audit log of an approval request: who, when, what, from which state."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_label = models.CharField(max_length=200, help_text="Who acted, kept even if the user is deleted.")
    action = models.CharField(max_length=40)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ApprovalEventQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
