"""Mail to the team that owns a skill: the one way any app tells owners something.

`notify_owners` never sends inside the caller (an agent's request, a gate thread): it hands the
message to the `email_owners` Celery task below. A dedupe key sends at most one mail per
key every 15 minutes, however many calls trip the same alarm.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail

from registry.models import Skill

logger = logging.getLogger(__name__)
DEDUPE_S = 900


def owner_address(skill_name: str) -> str:
    skill = Skill.objects.filter(name=skill_name).select_related("owner_team").first()
    return skill.owner_team.email if skill is not None and skill.owner_team is not None else ""


def notify_owners(*, skill_name: str, subject: str, body: str, dedupe_key: str = "") -> bool:
    """Queue a mail to the owning team; False when the dedupe key already sent one recently."""
    if dedupe_key and not cache.add(f"airlock:owner-alert:{dedupe_key}", 1, timeout=DEDUPE_S):
        return False
    email_owners.delay(skill_name=skill_name, subject=subject, body=body)
    return True


@shared_task(
    name="registry.tasks.email_owners", ignore_result=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=3
)
def email_owners(*, skill_name: str, subject: str, body: str) -> bool:
    return email_owning_team(skill_name=skill_name, subject=subject, body=body)


def email_owning_team(*, skill_name: str, subject: str, body: str) -> bool:
    """Send now (the task's body); False when the team has no address."""
    address = owner_address(skill_name)
    if not address:
        logger.warning("No owner address for %s: %s", skill_name, subject)
        return False
    send_mail(f"[Airlock] {subject}", body, settings.DEFAULT_FROM_EMAIL, [address], fail_silently=True)
    return True


__all__ = ["email_owners", "email_owning_team", "notify_owners", "owner_address"]
