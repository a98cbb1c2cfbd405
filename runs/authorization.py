"""Who may run what, decided once and checked again, live, immediately before anything executes.

The gate decides a call when it arrives (`permitted`, `decide`); every path that later acts on it
(the gate's own writes, an approved resume, an edited approval, a client-executed result, a
pipeline step, a long-running job's end) calls `live_refusal` first. It checks the state as of that
moment, not the run's pinned snapshot: the agent is neither revoked nor suspended, the tenant is not
frozen (for anything but a read), a grant still covers the skill for this tenant and agent role, the
skill version is still callable, the run is open (not stopped by a person), and the policy on the
final arguments is no worse than the verdict that was approved. One query reads the run, its agent, its
tenant's freeze and the gate generation; grants, policies and the version's standing come from the gate
caches for exactly that generation (runs/gate_cache.py), which the database bumps in the same transaction
as any change to them, so they are as current as the rows themselves.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass

from airlock_sdk.policy import context as policy
from airlock_sdk.policy import permission
from django.db.models import Subquery
from django.utils import timezone

from console.models import Agent, GateGeneration, Tenant
from policies.engine import VERDICT_RANK, Decision
from policies.services import ActivePolicies, evaluate_with_shadow, load_active_policies
from registry.models import Effect, SkillVersion, VersionStatus
from registry.snapshots import ResolvedSkill, index_for
from registry.stages import Audience
from runs import gate_cache, lifecycle
from runs.errors import CallError, Declined, NotPermitted
from runs.models import Run, RunStatus

CALLABLE_STATUSES = frozenset({VersionStatus.ACTIVE, VersionStatus.DEPRECATED})


@dataclass(frozen=True)
class RunFacts:
    """What a decision needs to know about the run, as of the moment it is made."""

    tenant_id: int
    tenant_slug: str
    agent_id: int
    agent_name: str
    agent_role: str
    end_user: str
    end_user_roles: tuple[str, ...]
    tainted: bool
    taint_source: str

    @classmethod
    def of(cls, run: Run, *, tainted: bool | None = None, taint_source: str | None = None) -> RunFacts:
        return cls(
            tenant_id=run.tenant_id,
            tenant_slug=run.tenant.slug,
            agent_id=run.agent_id,
            agent_name=run.agent.name,
            agent_role=run.agent.role,
            end_user=run.end_user,
            end_user_roles=tuple(run.end_user_roles or ()),
            tainted=run.tainted if tainted is None else tainted,
            taint_source=run.taint_source if taint_source is None else taint_source,
        )


def permitted(
    skill: ResolvedSkill,
    facts: RunFacts,
    grants: list[tuple[str, list[str]]],
    *,
    no_grant_code: str = "no_grant",
    available: list[str] | None = None,
) -> None:
    """Raise NotPermitted unless the skill is offered to the tenant and role and a grant covers it."""
    if skill.builtin:
        return  # find_tools and describe_tool answer only within what the run may call already
    refused = permission.refusal(
        name=skill.name,
        manifest=skill.manifest,
        tenant_slug=facts.tenant_slug,
        agent_role=facts.agent_role,
        grants=grants,
        no_grant_code=no_grant_code,
    )
    if refused is not None:
        raise NotPermitted(refused.message, code=refused.code, available=available if refused.no_grant else None)


def policy_context(skill: ResolvedSkill, facts: RunFacts, arguments: dict) -> dict:
    """The documented context policies see (docs/policies.md)."""
    return policy.call_context(
        skill={
            "name": skill.name,
            "version": skill.version,
            "effect": skill.effect,
            "data_class": skill.data_classification,
            "namespace": skill.namespace,
        },
        arguments=arguments,
        agent_id=facts.agent_id,
        agent_name=facts.agent_name,
        agent_role=facts.agent_role,
        end_user=facts.end_user,
        end_user_roles=facts.end_user_roles,
        tenant_slug=facts.tenant_slug,
        tainted=facts.tainted,
        taint_source=facts.taint_source,
    )


def approval_required(skill: ResolvedSkill) -> bool:
    return policy.approval_required(skill.manifest)


def decide(skill: ResolvedSkill, facts: RunFacts, arguments: dict, *, policies: ActivePolicies) -> Decision:
    """The policy verdict for these exact arguments."""
    return evaluate_with_shadow(
        active=policies,
        context=policy_context(skill, facts, arguments),
        tenant_id=facts.tenant_id,
        approval_required=approval_required(skill),
    )


def policy_refusal(decision: Decision, *, approved_verdict: str) -> Declined | None:
    """`policy_changed` when the verdict on the final arguments is worse than the one approved."""
    if VERDICT_RANK[decision.verdict] <= VERDICT_RANK[approved_verdict]:
        return None
    return Declined(
        f"The policy now answers {decision.verdict} for this call: {decision.reason}",
        code="policy_changed",
        rule_id=decision.rule_id,
        policy_version=decision.policy_version or None,
    )


def live_refusal(
    *,
    run: Run,
    skill: ResolvedSkill,
    arguments: dict | None,
    approved_verdict: str,
    policies: ActivePolicies | None = None,
) -> CallError | None:
    """The reason this call must not execute now, or None. One query, plus the gate caches' loads when
    the generation moved since they were filled.

    `arguments=None` skips the policy: a long-running job's end delivers what already ran, and its
    raw arguments are gone by then.
    """
    generation = GateGeneration.objects.filter(pk=1)
    row = (
        Run.objects.filter(pk=run.pk)
        .annotate(gate_epoch=Subquery(generation.values("epoch")), gate_number=Subquery(generation.values("number")))
        .values_list(
            "status",
            "status_reason",
            "stopped_by_label",
            "tainted",
            "taint_source",
            "agent__revoked_at",
            "agent__suspended_at",
            "agent__suspended_until",
            "agent__suspended_by_label",
            "agent__suspend_reason",
            "tenant__frozen_at",
            "tenant__frozen_by_label",
            "tenant__freeze_reason",
            "gate_epoch",
            "gate_number",
        )
        .first()
    )
    if row is None:
        return NotPermitted("The run no longer exists.", code="run_closed")
    (status, status_reason, stopped_by, tainted, taint_source, agent_revoked_at, *held, epoch, number) = row
    agent, tenant = _live_agent(run, agent_revoked_at, *held[:4]), _live_tenant(run, *held[4:])
    closed = run_refusal(
        Run(status=status, status_reason=status_reason, stopped_by_label=stopped_by, agent=agent, tenant=tenant)
    ) or frozen_refusal(tenant, skill.effect)
    if closed is not None:
        return closed
    live = (epoch, number) if epoch is not None else None  # no generation row: every lookup reads live
    facts = RunFacts.of(run, tainted=tainted, taint_source=taint_source)
    try:
        permitted(
            skill,
            facts,
            gate_cache.active_grants(tenant_id=run.tenant_id, agent_role=facts.agent_role, generation=live),
            no_grant_code="grant_revoked",
        )
    except NotPermitted as exc:
        return NotPermitted(f"The grant for {skill.name} was revoked: {exc.message}", code="grant_revoked")
    refusal = skill_refusal(skill, generation=live)
    if refusal is not None or arguments is None:
        return refusal
    decision = decide(skill, facts, arguments, policies=policies or gate_cache.active_policies(generation=live))
    return policy_refusal(decision, approved_verdict=approved_verdict)


def _live_agent(run: Run, revoked_at, suspended_at, suspended_until, by_label, reason) -> Agent:
    """The run's agent with its standing as just read (its other fields as loaded with the run)."""
    agent = copy(run.agent)
    agent.revoked_at, agent.suspended_at, agent.suspended_until = revoked_at, suspended_at, suspended_until
    agent.suspended_by_label, agent.suspend_reason = by_label, reason
    return agent


def _live_tenant(run: Run, frozen_at, by_label, reason) -> Tenant:
    tenant = copy(run.tenant)
    tenant.frozen_at, tenant.frozen_by_label, tenant.freeze_reason = frozen_at, by_label, reason
    return tenant


def run_refusal(run: Run) -> NotPermitted | None:
    """Why nothing may run in this run now, from its agent's and its own state as loaded: a revoked or
    suspended agent, or a closed run (a stopped one names who stopped it and why)."""
    agent = run.agent
    if agent.revoked_at is not None:
        return NotPermitted("The agent's key was revoked; nothing runs for it any more.", code="agent_revoked")
    if agent.is_suspended(timezone.now()):
        return agent_suspended(agent)
    if run.status == RunStatus.STOPPED:
        return stopped_refusal(run)
    if not lifecycle.is_open(run.status):
        return NotPermitted(f"The run is {run.status}; nothing more runs in it.", code="run_closed")
    return None


def stopped_refusal(run: Run) -> NotPermitted | None:
    """`run_stopped`, naming who stopped the run and why; None for a run no person stopped."""
    if run.status != RunStatus.STOPPED:
        return None
    return NotPermitted(
        f"{run.stopped_by_label or 'An operator'} stopped this run: {run.status_reason or 'no reason given'}. "
        "Nothing more runs in it; do not retry.",
        code="run_stopped",
        stopped_by=run.stopped_by_label,
        reason=run.status_reason,
    )


def agent_suspended(agent: Agent) -> NotPermitted:
    until = agent.suspended_until.isoformat() if agent.suspended_until else None
    return NotPermitted(agent.suspension_notice(), code="agent_suspended", suspended_until=until)


def frozen_refusal(tenant: Tenant, effect: str) -> NotPermitted | None:
    """A frozen tenant runs reads only: `tenant_frozen` for any other effect."""
    if not tenant.is_frozen or effect == Effect.READ:
        return None
    reason = f": {tenant.freeze_reason}" if tenant.freeze_reason else ""
    return NotPermitted(
        f"{tenant.frozen_by_label or 'An admin'} froze tenant {tenant.slug}{reason}. Only reads run until it is "
        "unfrozen.",
        code="tenant_frozen",
    )


def skill_refusal(skill: ResolvedSkill, *, generation: gate_cache.Generation = None) -> NotPermitted | None:
    if skill.builtin:
        return None
    version = gate_cache.version_standing(skill.skill_version_id, generation=generation)
    if version is None or version[0] not in CALLABLE_STATUSES:
        replacement = replacement_of(skill)
        return NotPermitted(
            f"{skill.name} {skill.version} was retired; it no longer runs"
            + (f". Use {replacement} instead." if replacement else "."),
            code="skill_retired",
            replacement=replacement,
        )
    if version[0] == VersionStatus.DEPRECATED and version[1] is not None and version[1] <= timezone.now():
        return NotPermitted(f"{skill.name} {skill.version} passed its sunset; it no longer runs.", code="skill_retired")
    return None


def replacement_of(skill: ResolvedSkill) -> str | None:
    """The skill its owners named to replace this version, as recorded now (it may postdate the snapshot)."""
    live = SkillVersion.objects.filter(pk=skill.skill_version_id).values_list("replacement__name", flat=True).first()
    return live or skill.replacement_name


__all__ = [
    "CALLABLE_STATUSES",
    "RunFacts",
    "agent_suspended",
    "approval_required",
    "decide",
    "decision_on",
    "frozen_refusal",
    "live_refusal",
    "permitted",
    "policy_context",
    "policy_refusal",
    "replacement_of",
    "run_refusal",
    "skill_refusal",
    "stopped_refusal",
]


def decision_on(call, arguments: dict) -> Decision | None:
    """The policy's verdict, now, on a recorded call with other arguments (an approver's edit)."""
    run = call.run
    skill = index_for(run.snapshot).resolve(call.name, call.requested_version or None, audience=Audience.of_run(run))
    if skill is None or skill.skill_version_id != call.skill_version_id:
        return None
    live = Run.objects.filter(pk=run.pk).values_list("tainted", "taint_source").first() or (False, "")
    return decide(
        skill, RunFacts.of(run, tainted=live[0], taint_source=live[1]), arguments, policies=load_active_policies()
    )
