"""Console pages of approver notifications: each approver's own preference, and a tenant admin's
channels (webhook, e-mail) with the deliveries that failed or are still being retried."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from approvals import notifications
from approvals.forms import NotificationChannelsForm, NotificationPreferenceForm
from approvals.models import (
    ApprovalNotice,
    DeliveryStatus,
    NoticeStatus,
    NotificationPreference,
    SlackLink,
    WebhookDelivery,
)
from approvals.webhooks import UnsafeCallbackURL
from console.models import Role
from console.tenancy import tenant_for_user_or_404, tenants_for
from lib.public_url import public_reverse

RECENT_ROWS = 30


def _preference_form(tenant, preference: NotificationPreference | None, data=None) -> NotificationPreferenceForm:
    initial = {"mode": preference.mode, "digest_minutes": preference.digest_minutes} if preference else {}
    return NotificationPreferenceForm(data, initial=initial, auto_id=f"id_{tenant.slug}_%s")


def _preferences_page(request: HttpRequest, *, failed_form=None, failed_slug: str = "", status: int = 200):
    tenants = list(tenants_for(request.user, Role.APPROVER).order_by("slug"))
    saved = {p.tenant_id: p for p in NotificationPreference.objects.filter(user=request.user, tenant__in=tenants)}
    slack_links = {link.tenant_id: link for link in SlackLink.objects.filter(user=request.user, tenant__in=tenants)}
    rows = [
        {
            "tenant": tenant,
            "preference": saved.get(tenant.pk),
            "slack_link": slack_links.get(tenant.pk),
            "email_enabled": notifications.channels_of(tenant).email_enabled,
            "form": failed_form if tenant.slug == failed_slug else _preference_form(tenant, saved.get(tenant.pk)),
        }
        for tenant in tenants
    ]
    return render(request, "approvals/notification_preferences.html", {"rows": rows}, status=status)


@login_required
@require_safe
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """How the signed-in approver hears of new requests, per tenant where they approve."""
    return _preferences_page(request)


@login_required
@require_POST
def save_preference(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.APPROVER)
    form = _preference_form(tenant, None, request.POST)
    if not form.is_valid():
        return _preferences_page(request, failed_form=form, failed_slug=tenant.slug, status=400)
    preference = notifications.save_notification_preference(tenant=tenant, user=request.user, **form.cleaned_data)
    messages.success(request, f"{tenant.name}: new requests are e-mailed to you {preference.summary}.")
    return redirect("approvals:notification_preferences")


def _channels_page(request: HttpRequest, tenant, form: NotificationChannelsForm, status: int = 200) -> HttpResponse:
    webhook_rows = (
        WebhookDelivery.objects.filter(run__tenant=tenant, approval__isnull=False)
        .select_related("approval")
        .order_by("-created_at")[:RECENT_ROWS]
    )
    mail_rows = (
        ApprovalNotice.objects.filter(tenant=tenant).select_related("user").order_by("-created_at")[:RECENT_ROWS]
    )
    failed_webhooks = WebhookDelivery.objects.filter(
        run__tenant=tenant, approval__isnull=False, status__in=[DeliveryStatus.FAILED, DeliveryStatus.BLOCKED]
    ).count()
    failed_mails = ApprovalNotice.objects.filter(tenant=tenant, status=NoticeStatus.FAILED).count()
    retrying = (
        WebhookDelivery.objects.filter(
            run__tenant=tenant, approval__isnull=False, status=DeliveryStatus.PENDING, attempts__gt=0
        ).count()
        + ApprovalNotice.objects.filter(tenant=tenant, status=NoticeStatus.PENDING, attempts__gt=0).count()
    )
    context = {
        "tenant": tenant,
        "form": form,
        "channels": notifications.channels_of(tenant),
        "webhook_rows": webhook_rows,
        "mail_rows": mail_rows,
        "failed": failed_webhooks + failed_mails,
        "slack_request_url": public_reverse("slack:actions", args=[tenant.slug]),
        "retrying": retrying,
    }
    return render(request, "approvals/notification_settings.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def notification_settings(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """A tenant admin's channels and the notifications that did not get through."""
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.ADMIN)
    channels = notifications.channels_of(tenant)
    initial = {"webhook_url": channels.webhook_url, "email_enabled": channels.email_enabled}
    form = NotificationChannelsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            notifications.save_notification_channels(tenant=tenant, user=request.user, **form.cleaned_data)
        except UnsafeCallbackURL as exc:  # the name resolved somewhere else between the form and the save
            form.add_error("webhook_url", f"Airlock may not send to this URL: {exc}.")
        else:
            messages.success(request, "Notification channels saved.")
            return redirect("approvals:notification_settings", tenant_slug=tenant.slug)
    return _channels_page(request, tenant, form, status=400 if form.errors else 200)
