"""Sections other apps' pages include: the skill page's breakers, the run page's steps and jobs."""

from __future__ import annotations

from django import template

from registry.models import SkillVersion
from reliability.models import BreakerTransition, LongJob, Pipeline, ReconciliationItem
from runs.plane import breakers

register = template.Library()


def _skill_domains(skill_name: str) -> list[str]:
    domains = []
    for manifest in SkillVersion.objects.filter(skill__name=skill_name).published().values_list("manifest", flat=True):
        adapter = (manifest or {}).get("execution", {}).get("adapter", "")
        if adapter and not adapter.startswith(("python:", "client:")):
            domains.append(breakers.domain_for(adapter))
    seen = BreakerTransition.objects.filter(skill_name=skill_name).values_list("domain", flat=True).distinct()
    return sorted(set(domains) | set(seen))


@register.inclusion_tag("reliability/_skill_section.html")
def skill_reliability(skill_name: str) -> dict:
    return {
        "breakers": [breakers.snapshot(domain) for domain in _skill_domains(skill_name)],
        "transitions": BreakerTransition.objects.filter(skill_name=skill_name)[:10],
        "open_items": ReconciliationItem.objects.filter(skill_name=skill_name, status="open").count(),
    }


@register.inclusion_tag("reliability/_run_section.html")
def run_reliability(run) -> dict:
    return {
        "pipelines": Pipeline.objects.filter(run=run).prefetch_related("steps"),
        "jobs": LongJob.objects.filter(run=run),
        "items": ReconciliationItem.objects.filter(run=run).select_related("call"),
    }


PILL = {
    "closed": "ok",
    "open": "bad",
    "half_open": "warn",
    "succeeded": "ok",
    "compensated": "info",
    "failed": "bad",
    "compensation_failed": "bad",
    "no_inverse": "warn",
    "waiting": "warn",
    "pending": "neutral",
    "skipped": "neutral",
    "not_run": "neutral",
    "running": "info",
    "gave_up": "bad",
    "resolved": "ok",
}


@register.filter
def pill(state: str) -> str:
    return PILL.get(state, "neutral")


@register.filter
def state_label(state: str) -> str:
    return state.replace("_", "-")
