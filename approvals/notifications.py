"""Use cases of approver notifications: tell the tenant's webhook and approvers of a new request,
send the digests that are due, and save the tenant's channels and each approver's preference.

Exactly once: the webhook notice is a WebhookDelivery unique per request, and each e-mail is an
ApprovalNotice unique per (request, approver); whoever inserts the row sends, a racing second
worker gets an IntegrityError and does nothing. Webhook notices reuse the signed, retried delivery
of run events (approvals.delivery); e-mails retry with the same backoff.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.core.mail import BadHeaderError, send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from approvals import decision_links, delivery, notices, tasks, webhooks
from approvals.models import (
    ApprovalNotice,
    ApprovalRequest,
    DeliveryStatus,
    NoticeStatus,
    NotificationPreference,
    NotifyMode,
    TenantNotificationSettings,
    WebhookDelivery,
)
from console.models import Role, Tenant
from lib.sealing import seal

logger = logging.getLogger(__name__)

MAIL_ERRORS = (smtplib.SMTPException, OSError, BadHeaderError)


def channels_of(tenant: Tenant) -> TenantNotificationSettings:
    """The tenant's settings row, or the unsaved defaults (e-mail on, no webhook)."""
    found = TenantNotificationSettings.objects.filter(tenant=tenant).first()
    return found or TenantNotificationSettings(tenant=tenant)


def approvers_of(approval: ApprovalRequest) -> list:
    """Who may decide the request (its routed group's members, or every approver of the tenant) with an
    address, except the person the run acts for."""
    users = approval.deciders().exclude(email="").order_by("pk")
    return [user for user in users if not approval.acts_for(user)]


def preferences_of(tenant_id: int, users: list) -> dict[int, NotificationPreference]:
    rows = NotificationPreference.objects.filter(tenant_id=tenant_id, user__in=users)
    return {row.user_id: row for row in rows}


def announce_new_request(approval: ApprovalRequest) -> None:
    """Called as the request opens: notify once the request is committed. Robust: a broker that is
    down loses the notification (logged), never the agent's answer; the request is in the inbox."""
    transaction.on_commit(lambda: tasks.notify_new_request.delay(approval.pk), robust=True)


def _claim(model, **fields):
    """Insert the row that entitles this worker to send; None when another worker already did."""
    try:
        with transaction.atomic():
            return model.objects.create(**fields)
    except IntegrityError:
        return None


def notify_new_request(*, approval_id: int) -> ApprovalRequest | None:
    """Post the tenant's webhook and mail each approver who wants it at once; twice does it once."""
    approval = ApprovalRequest.objects.select_related("tenant", "call__run").filter(pk=approval_id).first()
    if approval is None or not approval.is_pending:
        return approval
    channels = channels_of(approval.tenant)
    notice = notices.notice_of(approval)
    if channels.webhook_url:
        posted = _claim(
            WebhookDelivery,
            run=approval.call.run,
            approval=approval,
            url=channels.webhook_url,
            body=notices.slack_body(notice, interactive=channels.slack_interactive),
            status=DeliveryStatus.PENDING,
        )
        if posted is not None:
            tasks.deliver_webhook.delay_on_commit(str(posted.pk))
    if channels.email_enabled:
        users = approvers_of(approval)
        preferences = preferences_of(approval.tenant_id, users)
        for user in users:
            preference = preferences.get(user.pk)
            if preference is not None and preference.mode != NotifyMode.IMMEDIATELY:
                continue
            claimed = _claim(
                ApprovalNotice, tenant_id=approval.tenant_id, approval=approval, user=user, mode=NotifyMode.IMMEDIATELY
            )
            if claimed is not None:
                tasks.send_notice_mail.delay_on_commit(claimed.pk)
    return approval


def _mail_error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def send_notice_mail(*, notice_id: int) -> ApprovalNotice | None:
    """One attempt at one approver's e-mail; on failure retried with the webhooks' backoff."""
    notice = ApprovalNotice.objects.select_related("approval__tenant", "user").filter(pk=notice_id).first()
    if notice is None or notice.status != NoticeStatus.PENDING:
        return notice
    claimed = ApprovalNotice.objects.filter(pk=notice.pk, status=NoticeStatus.PENDING, attempts=notice.attempts)
    if not claimed.update(attempts=F("attempts") + 1):
        return notice  # another copy of the task is on this attempt
    attempt = notice.attempts + 1
    subject, body = notices.mail_of(notices.notice_of(notice.approval), decision_links.link_of(notice))
    try:
        send_mail(subject=subject, message=body, from_email=None, recipient_list=[notice.user.email])
    except MAIL_ERRORS as exc:
        error = _mail_error(exc)
        logger.warning("approval notice %s not sent: %s", notice.pk, error)
        if attempt >= settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS:
            ApprovalNotice.objects.filter(pk=notice.pk).update(
                status=NoticeStatus.FAILED, last_error=error, next_attempt_at=None
            )
            return notice
        delay = delivery.backoff_seconds(attempt)
        ApprovalNotice.objects.filter(pk=notice.pk).update(
            last_error=error, next_attempt_at=timezone.now() + timedelta(seconds=delay)
        )
        tasks.send_notice_mail.apply_async((notice.pk,), countdown=delay)
        return notice
    ApprovalNotice.objects.filter(pk=notice.pk).update(
        status=NoticeStatus.SENT, sent_at=timezone.now(), last_error="", next_attempt_at=None
    )
    return notice


# --- digests ----------------------------------------------------------------------------------------


def _digest_requests(preference: NotificationPreference, since, until) -> list[ApprovalRequest]:
    """Still-pending requests of the tenant opened in the digest's window that this approver may decide
    (routed to them or to nobody in particular)."""
    requests = (
        ApprovalRequest.objects.routed_to(preference.user)
        .pending()
        .filter(tenant_id=preference.tenant_id, created_at__gt=since, created_at__lte=until)
        .select_related("tenant")
        .order_by("created_at", "pk")
    )
    return [approval for approval in requests if not approval.acts_for(preference.user)]


def send_digest(*, preference: NotificationPreference, now=None) -> int:
    """One e-mail grouping the requests since this approver's last digest; the number it covers.

    The claim is a conditional update of `last_digest_at`, so a racing second beat does nothing; a
    failed digest is recorded on its notices (shown to the tenant's admins) and not sent again."""
    now = now or timezone.now()
    since = preference.last_digest_at
    claim = NotificationPreference.objects.filter(pk=preference.pk, mode=NotifyMode.DIGEST, last_digest_at=since)
    if not claim.update(last_digest_at=now):
        return 0
    user = preference.user
    if not (user.is_active and user.email and channels_of(preference.tenant).email_enabled):
        return 0
    if not user.memberships.filter(tenant_id=preference.tenant_id, role=Role.APPROVER).exists():
        return 0
    claimed = []
    for approval in _digest_requests(preference, since, now):
        notice = _claim(
            ApprovalNotice, tenant_id=approval.tenant_id, approval=approval, user=user, mode=NotifyMode.DIGEST
        )
        if notice is not None:
            claimed.append((notice, approval))
    if not claimed:
        return 0
    ids = [notice.pk for notice, _ in claimed]
    parts = [(notices.notice_of(a), decision_links.link_of(notice)) for notice, a in claimed]
    subject, body = notices.digest_of(preference.tenant.slug, parts)
    try:
        send_mail(subject=subject, message=body, from_email=None, recipient_list=[user.email])
    except MAIL_ERRORS as exc:
        ApprovalNotice.objects.filter(pk__in=ids).update(
            status=NoticeStatus.FAILED, attempts=F("attempts") + 1, last_error=_mail_error(exc)
        )
        return 0
    ApprovalNotice.objects.filter(pk__in=ids).update(status=NoticeStatus.SENT, attempts=1, sent_at=now)
    return len(ids)


def send_due_digests(*, now=None) -> int:
    """Beat: every approver whose digest is due gets it; the number of requests mailed."""
    now = now or timezone.now()
    mailed = 0
    due = NotificationPreference.objects.filter(mode=NotifyMode.DIGEST).select_related("user", "tenant")
    for preference in due:
        if preference.digest_due_at <= now:
            mailed += send_digest(preference=preference, now=now)
    return mailed


# --- settings ---------------------------------------------------------------------------------------


def save_notification_channels(
    *,
    tenant: Tenant,
    user,
    webhook_url: str,
    email_enabled: bool,
    slack_signing_secret: str = "",
    forget_slack_secret: bool = False,
):
    """A tenant admin sets the webhook (checked by the egress guard, https) and turns e-mail on or off.

    A Slack signing secret, when given, replaces the stored one (sealed at rest, never shown again);
    left empty it keeps the stored one, unless the admin asks to forget it (no more buttons)."""
    if webhook_url:
        webhooks.check_notification_url(webhook_url)
    defaults = {
        "webhook_url": webhook_url,
        "email_enabled": email_enabled,
        "updated_by": user,
        "updated_at": timezone.now(),
    }
    if slack_signing_secret:
        defaults["sealed_slack_signing_secret"] = seal(slack_signing_secret)
    elif forget_slack_secret:
        defaults["sealed_slack_signing_secret"] = ""
    channels, _ = TenantNotificationSettings.objects.update_or_create(tenant=tenant, defaults=defaults)
    return channels


def save_notification_preference(*, tenant: Tenant, user, mode: str, digest_minutes: int) -> NotificationPreference:
    """An approver's own choice for one tenant. Choosing a digest starts its window now."""
    now = timezone.now()
    existing = NotificationPreference.objects.filter(tenant=tenant, user=user).first()
    starts_digest = mode == NotifyMode.DIGEST and (existing is None or existing.mode != NotifyMode.DIGEST)
    defaults = {"mode": mode, "digest_minutes": digest_minutes, "updated_at": now}
    if starts_digest:
        defaults["last_digest_at"] = now
    preference, _ = NotificationPreference.objects.update_or_create(tenant=tenant, user=user, defaults=defaults)
    return preference
