"""Alerts to the team that owns a skill: breaker transitions and contract violations, by email."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail

from registry.models import Skill

logger = logging.getLogger(__name__)
DEDUPE_S = 900


def notify_owners(*, skill_name: str, subject: str, body: str, dedupe_key: str = "") -> bool:
    """Email the owning team (Team.email); the same dedupe key mails at most once per 15 minutes."""
    if dedupe_key and not cache.add(f"airlock:owner-alert:{dedupe_key}", 1, timeout=DEDUPE_S):
        return False
    team = Skill.objects.filter(name=skill_name).select_related("owner_team").first()
    address = team.owner_team.email if team is not None else ""
    if not address:
        logger.warning("No owner address for %s: %s", skill_name, subject)
        return False
    send_mail(f"[Airlock] {subject}", body, settings.DEFAULT_FROM_EMAIL, [address], fail_silently=True)
    return True
