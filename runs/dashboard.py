"""The runs app's home dashboard card: tool calls in the last 24 hours and their error rate."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from runs.models import CallStatus, ToolCall

ERROR_STATUSES = [CallStatus.FAILED, CallStatus.TIMEOUT_UNKNOWN, CallStatus.INVALID, CallStatus.DENIED]


def call_cards(user) -> list[dict]:
    since = timezone.now() - timedelta(hours=24)
    totals = (
        ToolCall.objects.visible_to(user)
        .filter(created_at__gte=since)
        .aggregate(calls=Count("id"), errors=Count("id", filter=Q(status__in=ERROR_STATUSES)))
    )
    calls, errors = totals["calls"], totals["errors"]
    rate = f"{100 * errors / calls:.1f}%" if calls else "—"
    return [
        {
            "label": "Tool calls, 24 h",
            "value": calls,
            "hint": f"error rate {rate} (failed, invalid, denied)",
            "url": reverse("runs:run_list"),
        }
    ]
