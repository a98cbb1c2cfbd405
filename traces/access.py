"""Who may read which traces and spans.

Tenant members read their tenant's traces whole. A skill's owning team reads, in every tenant, the
spans of its own skills, with payloads and the end user reduced to hashes (the tenant's data is
not theirs): no trace title (the run's task), no span names an agent chose, no shadow verdicts.
Anyone else gets 404, never 403, so ids do not leak across tenants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from console.tenancy import teams_for, tenants_for
from registry.models import Skill
from traces.models import Span, Trace
from traces.redaction import redacted_marker
from traces.timeline import Timeline, build_timeline

PAYLOAD_HINTS = ("argument", "result", "message", "input", "output", "prompt", "completion", "content")
# Which of the tenant's agent keys proposed a call, and which of its people decided an approval, is the
# tenant's business only (the "why" panel hides the approver from owners too).
HIDDEN_FROM_OWNERS = ("airlock.agent.key_lookup", "decided_by", "airlock.approval.decided_by")
# The policy that decided, beyond its verdict: rule, reason, scope, version, floors, shadow verdicts (a shadow
# rule the owner wrote, evaluated on another tenant's calls, would answer its questions) and refusals at
# execution, as the call's spans and its approval-request span (`rule_id`, `reason`) record them. The tenant's
# own rules: members only; the owner keeps the verdict (`airlock.verdict`).
POLICY_DETAIL_KEYS = ("rule_id", "reason")
POLICY_DETAIL_PREFIXES = (
    "airlock.decision.",
    "airlock.refused.",
    "gen_ai.security.policy.",
    "gen_ai.security.decision.reason",
)


def owned_skill_names(user: Any) -> list[str]:
    if not user.is_authenticated:
        return []

    return list(Skill.objects.filter(owner_team__in=teams_for(user)).values_list("name", flat=True))


def readable_traces(user: Any) -> QuerySet[Trace]:
    if not user.is_authenticated:
        return Trace.objects.none()
    if user.is_superuser:
        return Trace.objects.all()
    skills = owned_skill_names(user)
    condition = Q(tenant__in=tenants_for(user).values("pk"))
    if skills:
        condition |= Q(Exists(Span.objects.filter(trace=OuterRef("pk"), skill_name__in=skills)))
    return Trace.objects.filter(condition)


@dataclass(frozen=True)
class TraceAccess:
    """A trace as one user may read it: whole (`full`), or only the spans of `skills`."""

    trace: Trace
    full: bool
    skills: frozenset[str] = frozenset()

    def spans(self) -> QuerySet[Span]:
        spans = Span.objects.filter(trace=self.trace)
        return spans if self.full else spans.filter(skill_name__in=self.skills)

    def shown_attributes(self, attributes: dict[str, Any]) -> dict[str, Any]:
        return attributes if self.full else owner_view(attributes)

    @property
    def title(self) -> str:
        """The trace's name is the run's task, the tenant's own words: members only."""
        return self.trace.name if self.full else ""

    def shown_name(self, span: Span) -> str:
        """A span's name as this reader may see it: agents name their spans freely, so owners see the skill."""
        return span.name if self.full else (span.skill_name or span.kind)

    def timeline(self) -> Timeline:
        timeline = build_timeline(self.spans())
        if not self.full:
            for row in timeline.rows:
                row.values["name"] = row.values["skill_name"] or row.values["kind"]
        return timeline

    @property
    def end_user(self) -> str:
        if self.full:
            return self.trace.end_user
        return redacted_marker(self.trace.end_user)["sha256"][:12] if self.trace.end_user else ""


def owner_view(attributes: dict[str, Any]) -> dict[str, Any]:
    """What a skill owner outside the tenant sees: structure, hashes and sizes, never payload values."""
    out = {}
    for key, value in attributes.items():
        if key in HIDDEN_FROM_OWNERS or key in POLICY_DETAIL_KEYS or key.startswith(POLICY_DETAIL_PREFIXES):
            continue
        if (
            any(hint in key.lower() for hint in PAYLOAD_HINTS)
            and not isinstance(value, (bool, int, float))
            and not key.endswith((".sha256", ".bytes", ".truncated", "_tokens"))
        ):
            out[key] = value if isinstance(value, dict) and value.get("redacted") else redacted_marker(value)
        elif key in ("enduser.id", "user.id", "airlock.end_user"):
            out[key] = redacted_marker(value)
        else:
            out[key] = value
    return out


def trace_access_or_404(user: Any, pk: Any) -> TraceAccess:
    try:
        trace = Trace.objects.select_related("tenant", "agent").get(pk=pk)
    except (Trace.DoesNotExist, ValueError, TypeError):
        raise Http404("No such trace.") from None
    if user.is_authenticated and (user.is_superuser or tenants_for(user).filter(pk=trace.tenant_id).exists()):
        return TraceAccess(trace=trace, full=True)
    skills = frozenset(owned_skill_names(user))
    if skills and Span.objects.filter(trace=trace, skill_name__in=skills).exists():
        return TraceAccess(trace=trace, full=False, skills=skills)
    raise Http404("No such trace.")


def may_see_skill(user: Any, skill_name: str) -> bool:
    """The per-skill page and its alerts: the owning team and platform admins."""
    return bool(user.is_authenticated and (user.is_superuser or skill_name in owned_skill_names(user)))
