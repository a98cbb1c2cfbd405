"""Home dashboard cards: pending approvals per tenant and the oldest one waiting; for tenant admins,
approver notifications that failed in the last day."""

from collections import Counter
from datetime import timedelta

from django.db.models import Count
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince

from approvals import queries
from approvals.models import ApprovalNotice, DeliveryStatus, NoticeStatus, WebhookDelivery
from console.models import Role
from console.tenancy import tenants_for

FAILURE_WINDOW = timedelta(days=1)


def pending_cards(user) -> list[dict]:
    rows = queries.pending_by_tenant(user)
    if not rows and not queries.approvable(user).exists():
        return []
    total = sum(row["count"] for row in rows)
    oldest = min((row["oldest"] for row in rows), default=None)
    per_tenant = ", ".join(f"{row['tenant__slug']}: {row['count']}" for row in rows) or "nothing waiting"
    hint = per_tenant + (f" · oldest waiting {timesince(oldest)}" if oldest else "")
    return [{"label": "Pending approvals", "value": total, "hint": hint, "url": reverse("approvals:inbox")}]


def notification_failure_cards(user) -> list[dict]:
    """One card per administered tenant whose notifications failed lately; nothing when all is well."""
    since = timezone.now() - FAILURE_WINDOW
    tenants = tenants_for(user, Role.ADMIN)
    failed: Counter[str] = Counter()
    posts = WebhookDelivery.objects.filter(
        run__tenant__in=tenants,
        approval__isnull=False,
        created_at__gte=since,
        status__in=[DeliveryStatus.FAILED, DeliveryStatus.BLOCKED],
    )
    for row in posts.values("run__tenant__slug").annotate(n=Count("pk")):
        failed[row["run__tenant__slug"]] += row["n"]
    mails = ApprovalNotice.objects.filter(tenant__in=tenants, created_at__gte=since, status=NoticeStatus.FAILED)
    for row in mails.values("tenant__slug").annotate(n=Count("pk")):
        failed[row["tenant__slug"]] += row["n"]
    return [
        {
            "label": f"Failed notifications · {slug}",
            "value": count,
            "hint": "webhook posts or e-mails to approvers in the last day",
            "url": reverse("approvals:notification_settings", args=[slug]),
        }
        for slug, count in sorted(failed.items())
    ]
