"""A locally decided call judged again on upload, with today's grants, skill standing and policy.

The SDK decided from its bundle while Airlock was unreachable; policies may have changed since. Each uploaded
call goes through the gate's own rules (`runs.authorization.permitted`, `skill_refusal`, `decide`, and the
input schema): anything but allow flags the call, as does a call decided after its agent was revoked or
after its run was closed. A flagged call is kept (it ran; the record must say so) and its skill's owning team
and the tenant's admins are told: the owners through `registry.notifications.notify_owners`, the admins by
`runs.tasks.email_admins_flagged_call`, each at most once per skill and run every 15 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache

from console.models import Agent
from policies.services import load_active_policies
from registry.notifications import DEDUPE_S, notify_owners
from registry.snapshots import ResolvedSkill
from runs import authorization, gate_cache, tasks
from runs.authorization import RunFacts
from runs.errors import CallError
from runs.models import Run, ToolCall
from runs.validation import validate_arguments


@dataclass(frozen=True)
class Flag:
    """Why a locally decided call would not be allowed today: the verdict (deny or confirm) and the reason."""

    verdict: str
    reason: str


def _closed_before(run: Run, decided_at: datetime) -> bool:
    return run.finished_at is not None and decided_at > run.finished_at


def reevaluate(*, run: Run, agent: Agent, skill: ResolvedSkill, arguments: dict, decided_at: datetime) -> Flag | None:
    """None when today's rules allow the call as the SDK did; else the flag to record."""
    if agent.revoked_at is not None and decided_at > agent.revoked_at:
        return Flag("deny", f"Decided at {decided_at:%Y-%m-%d %H:%M:%S} UTC, after the agent was revoked.")
    if _closed_before(run, decided_at):
        return Flag("deny", f"Decided after the run was closed ({run.status}).")
    facts = RunFacts.of(run)
    try:
        validate_arguments(
            skill_version_id=skill.skill_version_id or skill.name,
            schema=skill.manifest.get("input_schema"),
            version=skill.version,
            name=skill.name,
            arguments=arguments,
        )
        authorization.permitted(skill, facts, _grants(run))
        refusal = authorization.skill_refusal(skill)
        if refusal is not None:
            raise refusal
    except CallError as exc:
        return Flag("deny", exc.message)
    decision = authorization.decide(skill, facts, arguments, policies=load_active_policies())
    if decision.verdict == "allow":
        return None
    rule = f" (rule {decision.rule_id})" if decision.rule_id else ""
    return Flag(decision.verdict, f"The policy now answers {decision.verdict}{rule}: {decision.reason}")


def _grants(run: Run) -> list[tuple[str, list[str]]]:
    return gate_cache.active_grants(tenant_id=run.tenant_id, agent_role=run.agent.role, generation=None)


def notify_flagged(*, call_pk: int) -> None:
    """Tell the skill's owners and the tenant's admins about a flagged local call (after commit)."""
    call = ToolCall.objects.select_related("run", "local").filter(pk=call_pk).first()
    if call is None:
        return
    subject = f"A call decided locally during an outage would not be allowed now: {call.name}"
    body = (
        f"Run {call.run_id}, call {call.call_id} ({call.name}) was decided by the agent's SDK under decision "
        f"bundle {call.local.bundle_number} at {call.local.decided_at:%Y-%m-%d %H:%M:%S} UTC while Airlock was "
        f"unreachable, and ran. Judged again on upload: {call.local.flag_verdict}. {call.local.flag_reason}\n\n"
        "Flagged local calls are listed under Runs, filter 'flagged local calls'."
    )
    dedupe = f"local-flag:{call.run_id}:{call.name}"
    notify_owners(skill_name=call.name, subject=subject, body=body, dedupe_key=dedupe)
    if cache.add(f"airlock:{dedupe}:admins", 1, timeout=DEDUPE_S):
        tasks.email_admins_flagged_call.delay(call_pk=call.pk, subject=subject, body=body)


__all__ = ["Flag", "notify_flagged", "reevaluate"]
