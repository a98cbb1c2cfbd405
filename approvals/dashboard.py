"""Home dashboard card: pending approvals per tenant and the oldest one waiting."""

from django.urls import reverse
from django.utils.timesince import timesince

from approvals import queries


def pending_cards(user) -> list[dict]:
    rows = queries.pending_by_tenant(user)
    if not rows and not queries.approvable(user).exists():
        return []
    total = sum(row["count"] for row in rows)
    oldest = min((row["oldest"] for row in rows), default=None)
    per_tenant = ", ".join(f"{row['tenant__slug']}: {row['count']}" for row in rows) or "nothing waiting"
    hint = per_tenant + (f" · oldest waiting {timesince(oldest)}" if oldest else "")
    return [{"label": "Pending approvals", "value": total, "hint": hint, "url": reverse("approvals:inbox")}]
