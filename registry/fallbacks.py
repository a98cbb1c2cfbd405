"""A skill's approved fallback (`execution.fallback`): the skill the model is offered while this one's breaker is
open. Its owners name it in a reviewed manifest; it must be a published skill, and never the skill itself. The
gate offers it only to an agent that may call it (runs.gate._offer_fallback)."""

from __future__ import annotations

from registry.models import SkillVersion, VersionStatus
from registry.validation import problem

PATH = "$.execution.fallback"


def fallback_problems(manifest: dict) -> list[dict]:
    name = (manifest.get("execution") or {}).get("fallback")
    if not name:
        return []
    if name == manifest.get("name"):
        return [problem(PATH, "fallback_is_itself", "A skill cannot be its own fallback.")]
    published = SkillVersion.objects.filter(
        skill__name=name, status__in=[VersionStatus.ACTIVE, VersionStatus.DEPRECATED]
    ).exists()
    if not published:
        return [problem(PATH, "unknown_fallback", f"{name} is no published skill; a fallback must be one already.")]
    return []


__all__ = ["fallback_problems"]
