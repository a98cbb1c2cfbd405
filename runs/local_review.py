"""A locally decided call judged again on upload: the decision kernel asked with the facts as they were when
the SDK decided and today's grants, skill standing and policy. As they were: the agent's key, its suspension
and its tenant's freeze at `decided_at` (console.incident_history, from the incident log), the run, and the
bundle the call names as it was issued (policies.models.IssuedBundleNumber: its window and its opt-in).

The SDK decided from its bundle while Airlock was unreachable; policies may have changed since. Anything but
allow flags the call. A flagged call is kept (it ran; the record must say so) and its skill's owning team
and the tenant's admins are told: the owners through `registry.notifications.notify_owners`, the admins by
`runs.tasks.email_admins_flagged_call`, each at most once per agent and skill every 15 minutes (a new
run does not mail them again).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from airlock_sdk.policy import kernel
from airlock_sdk.policy.kernel import Path
from django.core.cache import cache

from console.incident_history import IncidentHistory
from policies.models import IssuedBundleNumber
from policies.services import load_active_policies
from registry.notifications import DEDUPE_S, notify_owners
from registry.snapshots import ResolvedSkill
from runs import authorization, gate_cache, tasks
from runs.models import Run, ToolCall

NO_LONGER = "it is staged for other tenants or another share of runs, rolled back, or past its sunset."


POLICY_CODES = {"deny": "denied_by_policy", "confirm": "approval_required"}


@dataclass(frozen=True)
class Flag:
    """Why a locally decided call would not be allowed today: the verdict (deny or confirm), the reason, and
    the refusal's code (`agent_suspended`, `bundle_expired`, `denied_by_policy`...) and rule, which its audit
    row keeps once retention redacts the reason (runs.local_audit)."""

    verdict: str
    reason: str
    code: str = ""
    rule_id: str = ""


def _run_when_decided(run: Run, decided_at: datetime) -> kernel.RunState:
    state = authorization.run_state(run)
    if run.finished_at is not None and decided_at > run.finished_at:
        return replace(state, open=False)
    return replace(state, open=True, stopped=False)


def standing_when_decided(history: IncidentHistory, decided_at: datetime) -> tuple[kernel.Agent, kernel.Tenant]:
    """The agent (revoked, suspended) and its tenant (frozen) as they stood when the SDK decided."""
    agent = authorization.agent_facts(history.agent_at(decided_at), at=decided_at)
    return agent, authorization.tenant_facts(history.tenant_at(decided_at))


def bundle_when_decided(issued: IssuedBundleNumber | None, number: int, decided_at: datetime) -> kernel.Bundle:
    """The bundle the call names, as issued: expired when decided at or past its `valid_until`, and the opt-in it
    carried. A number issued before Airlock kept them has no record, and holds for nothing."""
    if issued is None:
        return kernel.Bundle(number=number, expired=True, valid_until="a time Airlock did not record")
    return kernel.Bundle(
        number=number,
        expired=decided_at >= issued.valid_until,
        valid_until=issued.valid_until.isoformat(),
        opted_in=issued.local_decisions,
    )


def reevaluate(
    *,
    run: Run,
    agent: kernel.Agent,
    tenant: kernel.Tenant,
    bundle: kernel.Bundle | None,
    skill: ResolvedSkill | None,
    resolves: bool = True,
    name: str = "",
    arguments: dict,
    decided_at: datetime,
) -> Flag | None:
    """None when the kernel, asked with the facts of the moment the SDK decided (`agent`, `tenant` and `bundle`
    as they stood then: `standing_when_decided`, `bundle_when_decided`), allows the call as the SDK did; else
    the flag to record. `resolves=False`: the run no longer gives it this version (flagged)."""
    facts = kernel.Facts(
        path=Path.UPLOAD_REVIEW,
        agent=agent,
        tenant=tenant,
        run=_run_when_decided(run, decided_at),
        name=skill.name if skill else name,
        version=skill.version if skill else None,
        skill=(
            authorization.skill_facts(skill, standing=authorization.standing_of(skill), reaches_audience=resolves)
            if skill
            else None
        ),
        arguments=arguments,
        argument_errors=authorization.errors_in(skill, arguments) if skill else None,
        grants=gate_cache.active_grants(tenant_id=run.tenant_id, agent_role=agent.role, generation=None),
        policies=authorization.evaluator(load_active_policies(), tenant_id=run.tenant_id),
        bundle=bundle,
    )
    ruling = kernel.decide(facts)
    when = f"Decided at {decided_at:%Y-%m-%d %H:%M:%S} UTC"
    if ruling.refused and ruling.refusal.code == "unknown_skill" and skill is not None:
        reason = f"{when}: {skill.name} {skill.version} no longer resolves for this run: {NO_LONGER}"
        return Flag("deny", reason, code="version_no_longer_resolves")
    if ruling.refused:
        return Flag("deny", f"{when}: {ruling.refusal.message}", code=ruling.refusal.code)
    if ruling.verdict == "allow":
        return None
    decision = ruling.decision
    rule = f" (rule {decision.rule_id})" if decision.rule_id else ""
    reason = f"The policy now answers {decision.verdict}{rule}: {decision.reason}"
    return Flag(decision.verdict, reason, code=POLICY_CODES[decision.verdict], rule_id=decision.rule_id)


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
        "Flagged local calls are listed under Runs, filter 'flagged local calls'. Further flagged calls of this "
        "agent and skill in the next 15 minutes are listed there without another mail."
    )
    dedupe = f"local-flag:{call.run.agent_id}:{call.name}"  # per agent, not per run: a new run mails nobody again
    notify_owners(skill_name=call.name, subject=subject, body=body, dedupe_key=dedupe)
    if cache.add(f"airlock:{dedupe}:admins", 1, timeout=DEDUPE_S):
        tasks.email_admins_flagged_call.delay(call_pk=call.pk, subject=subject, body=body)


__all__ = ["Flag", "bundle_when_decided", "notify_flagged", "reevaluate", "standing_when_decided"]
