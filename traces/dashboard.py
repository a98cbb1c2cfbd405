"""Home dashboard card: traces of the last 24 hours and how many had errors; open alerts for owners."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from traces.access import owned_skill_names, readable_traces
from traces.models import Alert


def trace_cards(user) -> list[dict]:
    since = timezone.now() - timedelta(hours=24)
    recent = readable_traces(user).filter(started_at__gte=since)
    total = recent.count()
    failing = recent.filter(error_count__gt=0).count()
    cards = [
        {"label": "Traces, last 24 h", "value": total, "hint": f"{failing} with errors", "url": reverse("traces:list")}
    ]
    skills = owned_skill_names(user)
    if skills:
        alerts = Alert.objects.filter(skill_name__in=skills, fired_at__gte=since).count()
        cards.append(
            {
                "label": "Skill alerts, last 24 h",
                "value": alerts,
                "hint": f"on {len(skills)} skills",
                "url": reverse("traces:alerts"),
            }
        )
    return cards
