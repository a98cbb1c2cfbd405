import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from console.models import Agent, Role, Tenant
from console.tenancy import TenantScopedQuerySet, tenants_for
from lib.append_only import AppendOnlyError, AppendOnlyModel
from lib.identity import is_same_person


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    SCHEDULED = "scheduled"
    DECLINED = "declined"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"


# Its moves are data in approvals.lifecycle, the one writer of `status`; each is recorded as an ApprovalEvent.
NEGATIVE_STATUSES = {ApprovalStatus.DECLINED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED}


class ApprovalMode(models.TextChoices):
    REQUIRED = "required"
    TWO_PERSON = "two_person"


class ApproverGroupQuerySet(TenantScopedQuerySet):
    pass


class ApproverGroup(models.Model):
    """People who decide one kind of request in a tenant (the billing approvers for refunds).

    Members are approvers of the tenant (approvals.routing_rules checks it as they are added); one who loses
    the approver role keeps the row but neither sees nor decides the group's requests."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approver_groups")
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="approver_groups")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ApproverGroupQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="one_approver_group_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant.slug})"


class ApprovalRouteQuerySet(TenantScopedQuerySet):
    pass


class ApprovalRoute(models.Model):
    """One of a tenant's ordered routes: a request whose call matches `condition` (the policy language, over
    the policy context of the call) goes to `group`; the first match wins, no match means every approver.
    An overdue request also goes to `fallback_group`."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approval_routes")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=100)
    condition = models.TextField()
    group = models.ForeignKey(ApproverGroup, on_delete=models.PROTECT, related_name="routes")
    fallback_group = models.ForeignKey(
        ApproverGroup, null=True, blank=True, on_delete=models.PROTECT, related_name="fallback_routes"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    objects = ApprovalRouteQuerySet.as_manager()

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="one_approval_route_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.position}. {self.name} -> {self.group.name}"


class ApprovalRequestQuerySet(TenantScopedQuerySet):
    def routed_to(self, user, *, everything: bool = False) -> "ApprovalRequestQuerySet":
        """The requests `user` decides: in tenants where they are an approver, those routed to nobody in
        particular, to one of their groups, or (once escalated) to one of their groups as the fallback.
        With `everything`, also every request of the tenants where they are an admin (oversight; seeing
        is not deciding). The one rule of who sees a request in a list, the count, the websocket and the
        e-mails; `ApprovalRequest.deciders()` is the same rule read from the request's side."""
        if not user.is_authenticated:
            return self.none()
        mine = ApproverGroup.objects.filter(members=user).values("pk")
        routed = (
            models.Q(group__isnull=True)
            | models.Q(group__in=mine)
            | models.Q(escalated_at__isnull=False, fallback_group__in=mine)
        )
        visible = models.Q(tenant__in=tenants_for(user, Role.APPROVER).values("pk")) & routed
        if everything:
            visible |= models.Q(tenant__in=tenants_for(user, Role.ADMIN).values("pk"))
        return self.filter(visible)

    def pending(self) -> "ApprovalRequestQuerySet":
        return self.filter(status=ApprovalStatus.PENDING)

    def decided(self) -> "ApprovalRequestQuerySet":
        return self.exclude(status=ApprovalStatus.PENDING)


class ApprovalRequest(models.Model):
    """A confirm verdict waiting for a person, bound to the exact arguments and policy version."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approval_requests")
    call = models.OneToOneField("runs.ToolCall", on_delete=models.CASCADE, related_name="approval")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING, db_index=True
    )
    skill_name = models.CharField(max_length=200, blank=True, db_index=True)
    skill_version = models.CharField(max_length=64, blank=True)
    effect = models.CharField(max_length=16, blank=True)
    action = models.JSONField(help_text="skill, version, effect, data class and the exact arguments.")
    arguments_sha256 = models.CharField(max_length=64)
    policy_version = models.CharField(max_length=64, blank=True)
    rule_id = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)
    taint_source = models.CharField(max_length=300, blank=True)
    context = models.JSONField(default=dict, help_text="agent, end user, task, recent steps.")
    approval_mode = models.CharField(max_length=16, choices=ApprovalMode.choices, default=ApprovalMode.REQUIRED)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    delay_seconds = models.PositiveIntegerField(
        default=0, help_text="The skill's undo window (risk.delay_seconds) when the request opened: 0 runs at once."
    )
    answer = models.TextField(blank=True, help_text="A person's answer to an agent's human.ask: the call's result.")
    edited_arguments = models.JSONField(null=True, blank=True, help_text="The edited arguments, masked for display.")
    sealed_edited_arguments = models.TextField(blank=True, help_text="The edited raw arguments (lib.sealing).")
    edited_arguments_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_label = models.CharField(max_length=200, blank=True)
    decided_via = models.CharField(max_length=16, blank=True, help_text="console, api or system.")
    decline_reason = models.TextField(blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    scheduled_for = models.DateTimeField(
        null=True, blank=True, help_text="An approved call in its undo window runs at this moment unless cancelled."
    )
    cancelled_by_label = models.CharField(
        max_length=200, blank=True, help_text="Who took an approved call back during its undo window."
    )
    outcome = models.JSONField(null=True, blank=True, help_text="The result the agent received.")
    completed_at = models.DateTimeField(null=True, blank=True, help_text="When the outcome was recorded.")
    resume_attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    group = models.ForeignKey(
        ApproverGroup,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="requests",
        help_text="Who decides it, set once as it opens (approvals.routing_rules); empty means every approver.",
    )
    fallback_group = models.ForeignKey(
        ApproverGroup,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="escalated_requests",
        help_text="Who also decides it once it escalates.",
    )
    route_name = models.CharField(max_length=100, blank=True, help_text="The route that chose the group.")

    objects = ApprovalRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "status", "-created_at"]),
            models.Index(fields=["status", "expires_at"]),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == ApprovalStatus.PENDING

    @property
    def is_open(self) -> bool:
        """The call has not run and was not refused: its raw arguments are still kept (pending, or approved and
        not yet started, as in its undo window)."""
        return self.status in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED, ApprovalStatus.SCHEDULED)

    @property
    def is_scheduled(self) -> bool:
        """Approved, waiting out its undo window: an approver may still cancel it."""
        return self.status == ApprovalStatus.SCHEDULED

    @property
    def is_expired_now(self) -> bool:
        return self.is_pending and self.expires_at <= timezone.now()

    @property
    def run(self):
        return self.call.run

    def acts_for(self, user) -> bool:
        """True when the run acts on behalf of this user: they may not approve it themselves.

        Compared through lib.identity (case, Unicode forms and lookalikes, invisible characters, prefixes,
        address and directory spellings, `account:<id>` bindings), so that a respelling of the approver's
        name is still the approver."""
        return is_same_person(str(self.context.get("end_user") or ""), user)

    def deciders(self) -> models.QuerySet:
        """Active users who may decide this request: approvers of its tenant, and, when it is routed,
        members of its group (or of its fallback group once escalated). `routed_to` read from this side."""
        users = get_user_model().objects.filter(
            is_active=True, memberships__tenant_id=self.tenant_id, memberships__role=Role.APPROVER
        )
        if self.group_id is None:
            return users.distinct()
        groups = [self.group_id]
        if self.escalated_at is not None and self.fallback_group_id is not None:
            groups.append(self.fallback_group_id)
        return users.filter(approver_groups__in=groups).distinct()

    def routed_to_user(self, user) -> bool:
        """Whether the routing lets `user` decide this request (the approver role is checked apart)."""
        return self.group_id is None or self.deciders().filter(pk=user.pk).exists()

    def decided_summary(self) -> str:
        when = self.decided_at.strftime("%Y-%m-%d %H:%M:%S UTC") if self.decided_at else "an unknown time"
        return f"already {self.decision_word} by {self.decided_by_label or 'someone'} at {when}"

    @property
    def decision_word(self) -> str:
        """What the person decided, even after the request moved on to executing or executed."""
        if self.status in (
            ApprovalStatus.APPROVED,
            ApprovalStatus.SCHEDULED,
            ApprovalStatus.EXECUTING,
            ApprovalStatus.EXECUTED,
            ApprovalStatus.FAILED,
        ) or (self.status == ApprovalStatus.CANCELLED and self.cancelled_by_label):
            return "answered" if self.answer else ApprovalStatus.APPROVED  # a question (human.ask) is answered
        return self.status


class ApprovalVote(models.Model):
    """One approver's approval of a two-person request; a person can vote once."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["request", "user"], name="one_vote_per_approver")]
        ordering = ["created_at"]


APPEND_ONLY = "The approval audit log is append-only; only approvals.retention redacts or deletes it."


class ApprovalEventQuerySet(TenantScopedQuerySet):
    """Reads of the audit log. Bulk updates and deletes are refused; the one deliberate exception is
    `approvals.retention` (redact when the run is deleted, delete after the audit period), which goes
    through `retention_queryset()`. Cascades never reach the log: its foreign keys are SET_NULL."""

    tenant_field = "tenant"

    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(APPEND_ONLY)

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(APPEND_ONLY)

    def bulk_update(self, *args: Any, **kwargs: Any) -> int:
        raise AppendOnlyError(APPEND_ONLY)


class ApprovalEvent(AppendOnlyModel):
    """The append-only audit log of an approval request: who, when, what, from which state.

    The row names its approval, run, call, skill and tenant itself (kept fields), so that it outlives
    the run under retention: deleting the request sets `request` to NULL, `redacted_at` records
    when `approvals.retention` reduced `detail` to its documented redacted form (docs/operations.md)
    and `detached_at` when the row outlived its request, the start of its audit period."""

    request = models.ForeignKey(
        ApprovalRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approval_ref = models.PositiveBigIntegerField(
        null=True, blank=True, db_index=True, help_text="The approval request's id, kept after it is deleted."
    )
    run_ref = models.UUIDField(null=True, blank=True, help_text="The run's id, kept after it is deleted.")
    call_ref = models.CharField(max_length=200, blank=True, help_text="The agent's call id in the run.")
    skill_name = models.CharField(max_length=200, blank=True)
    skill_version = models.CharField(max_length=64, blank=True)
    redacted_at = models.DateTimeField(null=True, blank=True, help_text="When retention redacted the detail.")
    detached_at = models.DateTimeField(
        null=True, blank=True, help_text="When the row outlived its request; its audit period counts from here."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200, help_text="Who acted, kept even if the user is deleted.")
    action = models.CharField(max_length=40)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ApprovalEventQuerySet.as_manager()
    append_only_message = APPEND_ONLY

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["detached_at"], name="detached_audit_detached_idx", condition=models.Q(request__isnull=True)
            )
        ]

    @classmethod
    def retention_queryset(cls) -> models.QuerySet:
        """A plain queryset that can update and delete: for `approvals.retention` alone."""
        return models.QuerySet(model=cls)


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    BLOCKED = "blocked"


class WebhookDeliveryQuerySet(TenantScopedQuerySet):
    tenant_field = "run__tenant"


class WebhookDelivery(models.Model):
    """One signed POST with retries: a run event to the run's callback URL, or (with `approval`) the
    notice of a new request to the tenant's notification webhook. The id is the receiver's
    de-duplication key; one notice per request (a unique constraint) however many workers race."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.ForeignKey(
        "runs.RunEvent", null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    approval = models.ForeignKey(
        ApprovalRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="webhook_notices"
    )
    url = models.URLField(max_length=500)
    body = models.TextField(help_text="The exact bytes sent on every attempt.")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = WebhookDeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval"], condition=models.Q(approval__isnull=False), name="one_webhook_notice_per_request"
            )
        ]

    def __str__(self) -> str:
        return f"delivery {self.id} ({self.status})"

    @property
    def signing_secret(self) -> str:
        """The run's callback secret, or the tenant's notification secret for a notice."""
        if self.approval_id:
            settings_row = TenantNotificationSettings.objects.filter(tenant_id=self.run.tenant_id).first()
            return settings_row.webhook_secret if settings_row else ""
        return self.run.webhook_secret


# --- approver notifications -------------------------------------------------------------------


def new_webhook_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class TenantNotificationSettings(models.Model):
    """Where a tenant's approvers hear of new requests: a Slack-compatible webhook and e-mail.

    Without a row: e-mail on, no webhook. The URL passed the egress guard (and https) when saved."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="notification_settings")
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret = models.CharField(max_length=64, default=new_webhook_secret)
    email_enabled = models.BooleanField(default=True)
    sealed_slack_signing_secret = models.TextField(
        blank=True, help_text="The tenant's Slack app signing secret, sealed (lib.sealing); empty: no buttons."
    )
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"notifications of {self.tenant.slug}"

    @property
    def slack_interactive(self) -> bool:
        """Slack messages carry Approve and Decline buttons: the tenant's Slack app can sign its clicks."""
        return bool(self.sealed_slack_signing_secret)


class NotifyMode(models.TextChoices):
    IMMEDIATELY = "immediately", "Immediately, one e-mail per request"
    DIGEST = "digest", "A digest every N minutes"
    OFF = "off", "Off (the inbox only)"


DIGEST_MINUTES_MIN = 5
DIGEST_MINUTES_MAX = 24 * 60


class NotificationPreference(models.Model):
    """How one approver wants e-mail about one tenant's new requests; no row means immediately."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16, choices=NotifyMode.choices, default=NotifyMode.IMMEDIATELY)
    digest_minutes = models.PositiveSmallIntegerField(
        default=60,
        validators=[MinValueValidator(DIGEST_MINUTES_MIN), MaxValueValidator(DIGEST_MINUTES_MAX)],
    )
    last_digest_at = models.DateTimeField(default=timezone.now, help_text="The digest covers requests after it.")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="one_preference_per_approver")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant.slug}: {self.mode}"

    @property
    def digest_due_at(self):
        return self.last_digest_at + timedelta(minutes=self.digest_minutes)

    @property
    def summary(self) -> str:
        """The choice in words: "immediately", "a digest every 30 minutes", "off"."""
        if self.mode == NotifyMode.DIGEST:
            return f"a digest every {self.digest_minutes} minutes"
        return str(self.mode)


class NoticeStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class ApprovalNoticeQuerySet(TenantScopedQuerySet):
    pass


class ApprovalNotice(models.Model):
    """One approver told by e-mail of one request, alone or in a digest: at most one row per pair,
    so a second worker (or a second digest) cannot mail the same person about the same request."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    approval = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="notices")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16, choices=NotifyMode.choices)
    status = models.CharField(max_length=16, choices=NoticeStatus.choices, default=NoticeStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    link_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When the e-mail's decision link decided; a used link is refused."
    )

    objects = ApprovalNoticeQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["approval", "user"], name="one_notice_per_approver")]

    def __str__(self) -> str:
        return f"notice of approval {self.approval_id} to {self.user_id} ({self.status})"


class SlackLinkQuerySet(TenantScopedQuerySet):
    pass


class SlackLink(models.Model):
    """A Slack user of a tenant's Slack app, linked to an Airlock user: proposed by that user in the console,
    confirmed by the Slack user from Slack (SlackLinkProposal, approvals.slack_linking).

    Only a linked Slack user's button clicks decide, and they decide as this Airlock user, under every
    rule of the inbox. One Airlock user per Slack user and one Slack user per Airlock user in a tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    slack_team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    slack_username = models.CharField(max_length=200, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links")
    created_at = models.DateTimeField(default=timezone.now)

    objects = SlackLinkQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "slack_team_id", "slack_user_id"], name="one_link_per_slack_user"
            ),
            models.UniqueConstraint(fields=["tenant", "user"], name="one_slack_user_per_person"),
        ]

    def __str__(self) -> str:
        return f"slack {self.slack_team_id}/{self.slack_user_id} is {self.user} in {self.tenant.slug}"


class SlackLinkProposal(models.Model):
    """A console user's claim that a Slack user is them, which links nothing by itself.

    The console shows a one-time code once and keeps only its hash; the link is made when the same Slack
    user types that code in Slack and confirms the account Airlock names there (approvals.slack_linking),
    which spends the proposal by deleting it. Open until `expires_at` and MAX_CODE_ATTEMPTS wrong codes."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    slack_team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    slack_username = models.CharField(max_length=200, blank=True)
    code_hash = models.CharField(max_length=64)
    failed_attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    objects = SlackLinkQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "slack_team_id", "slack_user_id"], name="slack_proposal_by_user")]

    def __str__(self) -> str:
        return f"{self.user} proposes slack {self.slack_team_id}/{self.slack_user_id} in {self.tenant.slug}"
