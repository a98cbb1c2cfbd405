"""What revoking a grant would have refused: the recent calls that only this grant let through.

Read from the recorded calls of the last AIRLOCK_GRANT_PREVIEW_DAYS days (at most PREVIEW_CALLS of them,
newest first, in one query): calls of the grant's tenant by agents of its role, to skills its pattern
covers, that the gate let through (allow, or confirm), since the grant was made, and that no other active
grant of the role covers. Shown on the grant's page before its admin confirms the revocation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from airlock_sdk.policy.permission import is_granted, pattern_covers
from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from policies.models import Grant
from runs.models import ToolCall, Verdict

PREVIEW_CALLS = 500


@dataclass
class RefusedRun:
    """One run that would have been refused a call, had the grant not existed."""

    run_id: str
    agent: str
    skills: list[str] = field(default_factory=list)
    calls: int = 0
    last_at: datetime | None = None


@dataclass
class RevocationPreview:
    days: int
    runs: list[RefusedRun]
    agents: list[str]
    calls: int
    truncated: bool


def _covered_calls(grant: Grant, since: datetime) -> QuerySet[ToolCall]:
    calls = ToolCall.objects.filter(
        run__tenant_id=grant.tenant_id,
        run__agent__role=grant.agent_role,
        created_at__gte=max(since, grant.granted_at),
        verdict__in=[Verdict.ALLOW, Verdict.CONFIRM],
    )
    pattern = grant.skill_pattern
    if pattern.endswith(".*"):
        return calls.filter(name__startswith=pattern[:-1])
    if "*" not in pattern:
        return calls.filter(name=pattern)
    return calls  # `*` or an fnmatch pattern: matched below, in Python


def revocation_preview(grant: Grant, *, now: datetime | None = None) -> RevocationPreview:
    days = settings.AIRLOCK_GRANT_PREVIEW_DAYS
    since = (now or timezone.now()) - timedelta(days=days)
    rows = list(
        _covered_calls(grant, since)
        .order_by("-created_at")
        .values_list("run_id", "run__agent__name", "name", "created_at")[:PREVIEW_CALLS]
    )
    others = list(
        Grant.objects.active()
        .filter(tenant_id=grant.tenant_id, agent_role=grant.agent_role)
        .exclude(pk=grant.pk)
        .values_list("skill_pattern", flat=True)
    )
    runs: dict[str, RefusedRun] = {}
    calls = 0
    for run_id, agent, skill, at in rows:
        if not pattern_covers(grant.skill_pattern, skill) or is_granted(others, skill):
            continue
        calls += 1
        run = runs.setdefault(str(run_id), RefusedRun(run_id=str(run_id), agent=agent, last_at=at))
        run.calls += 1
        if skill not in run.skills:
            run.skills.append(skill)
    return RevocationPreview(
        days=days,
        runs=list(runs.values()),
        agents=sorted({run.agent for run in runs.values()}),
        calls=calls,
        truncated=len(rows) == PREVIEW_CALLS,
    )
