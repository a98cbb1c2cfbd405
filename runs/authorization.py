"""The server's side of the decision kernel (`airlock_sdk.policy.kernel`): the facts each path holds, read
from the database, and the kernel's refusals as the gate's typed errors.

The gate decides a call when it arrives; every path that later acts on it (the gate's own writes, an
approved resume, an edited approval, a client-executed result, a pipeline step, a long-running job's end)
calls `live_refusal` first, which asks the kernel again with the state as of that moment, not the run's
pinned snapshot: the agent is neither revoked nor suspended, the tenant is not frozen (for anything but a
read), a grant still covers the skill for this tenant and agent role, the skill version is still callable,
the run is open (not stopped by a person), and the policy on the final arguments is no worse than the
verdict that was approved. One query reads the run, its agent, its tenant's freeze and the gate
generation; grants, policies and the version's standing come from the gate caches for exactly that
generation (runs/gate_cache.py), which the database bumps in the same transaction as any change to them,
so they are as current as the rows themselves.
"""

from __future__ import annotations

from copy import copy
from datetime import datetime

from airlock_sdk.policy import kernel
from airlock_sdk.policy.kernel import Path
from django.db.models import Subquery
from django.utils import timezone

from console.models import Agent, GateGeneration, Tenant
from policies.engine import Decision
from policies.services import ActivePolicies, evaluate_with_shadow, load_active_policies
from registry.models import SkillVersion, VersionStatus
from registry.snapshots import ResolvedSkill, index_for
from runs import builtin_tools, gate_cache, lifecycle
from runs.errors import CallError, Declined, NotFound, NotPermitted, RateLimited, Unavailable, ValidationFailed
from runs.models import Run, RunStatus
from runs.validation import argument_errors

CALLABLE_STATUSES = frozenset({VersionStatus.ACTIVE, VersionStatus.DEPRECATED})
ERRORS_BY_CLASS: dict[str, type[CallError]] = {
    "authorization": NotPermitted,
    "not_found": NotFound,
    "validation": ValidationFailed,
    "rate_limited": RateLimited,
    "declined": Declined,
    "unavailable": Unavailable,
}


# Facts ---------------------------------------------------------------------------------------------


def agent_facts(agent: Agent, *, at: datetime | None = None) -> kernel.Agent:
    suspended = agent.is_suspended(at or timezone.now())
    return kernel.Agent(
        id=agent.pk,
        name=agent.name,
        role=agent.role,
        revoked=agent.revoked_at is not None and (at is None or agent.revoked_at <= at),
        suspended=suspended,
        suspension_notice=agent.suspension_notice() if suspended else "",
        suspended_until=agent.suspended_until.isoformat() if suspended and agent.suspended_until else None,
    )


def tenant_facts(tenant: Tenant) -> kernel.Tenant:
    return kernel.Tenant(
        id=tenant.pk,
        slug=tenant.slug,
        frozen=tenant.is_frozen,
        frozen_by=tenant.frozen_by_label,
        freeze_reason=tenant.freeze_reason,
    )


def run_state(run: Run, *, tainted: bool | None = None, taint_source: str | None = None) -> kernel.RunState:
    return kernel.RunState(
        open=lifecycle.is_open(run.status),
        status=run.status,
        stopped=run.status == RunStatus.STOPPED,
        stopped_by=run.stopped_by_label,
        stop_reason=run.status_reason,
        end_user=run.end_user,
        end_user_roles=tuple(run.end_user_roles or ()),
        tainted=run.tainted if tainted is None else tainted,
        taint_source=run.taint_source if taint_source is None else taint_source,
    )


def standing_of(skill: ResolvedSkill, *, generation: gate_cache.Generation = None, status: str | None = None) -> str:
    """The version's standing now: callable, retired (or gone), or past its sunset. `status`: already read."""
    if skill.builtin:
        return kernel.CALLABLE
    if status is not None:
        return kernel.CALLABLE if status in CALLABLE_STATUSES else kernel.RETIRED
    version = gate_cache.version_standing(skill.skill_version_id, generation=generation)
    if version is None or version[0] not in CALLABLE_STATUSES:
        return kernel.RETIRED
    if version[0] == VersionStatus.DEPRECATED and version[1] is not None and version[1] <= timezone.now():
        return kernel.SUNSET
    return kernel.CALLABLE


def skill_facts(
    skill: ResolvedSkill | None, *, standing: str = kernel.CALLABLE, reaches_audience: bool = True
) -> kernel.Skill | None:
    """`reaches_audience=False`: the version is known but this run no longer resolves it (an upload's)."""
    if skill is None:
        return None
    return kernel.Skill(
        name=skill.name,
        version=skill.version,
        effect=skill.effect,
        data_class=skill.data_classification,
        namespace=skill.namespace,
        manifest=skill.manifest,
        builtin=skill.builtin,
        standing=standing,
        reaches_audience=reaches_audience,
        replacement=replacement_of(skill) if standing != kernel.CALLABLE else None,
    )


def errors_in(skill: ResolvedSkill, arguments: object) -> list[dict]:
    """The input schema's objections to the arguments (the validator compiled once per version)."""
    return argument_errors(
        skill_version_id=skill.skill_version_id or skill.name,
        schema=skill.manifest.get("input_schema"),
        version=skill.version,
        name=skill.name,
        arguments=arguments,
    )


def evaluator(policies: ActivePolicies, *, tenant_id: int) -> kernel.PolicyEvaluator:
    """The published policies for this tenant (and each shadow version's would-be verdict beside them)."""
    return lambda context, approval_required: evaluate_with_shadow(
        active=policies, context=context, tenant_id=tenant_id, approval_required=approval_required
    )


def call_error(refusal: kernel.Refusal) -> CallError:
    """A kernel refusal as the typed error its class names (docs/api.md, the error table)."""
    extra = {key: value for key, value in refusal.extra.items() if key != "no_grant"}
    return ERRORS_BY_CLASS[refusal.error_class](refusal.message, code=refusal.code, **extra)


def ruling_error(ruling: kernel.Ruling) -> CallError | None:
    return call_error(ruling.refusal) if ruling.refused else None


# Single rules the kernel applies first, for paths that check a whole run before any call --------------


def run_refusal(run: Run) -> CallError | None:
    """Why nothing may run in this run now, from its agent's and its own state as loaded: a revoked or
    suspended agent, or a closed run (a stopped one names who stopped it and why)."""
    refusal = kernel.standing_refusal(agent_facts(run.agent), run_state(run))
    return call_error(refusal) if refusal is not None else None


def stopped_refusal(run: Run) -> CallError | None:
    """`run_stopped`, naming who stopped the run and why; None for a run no person stopped."""
    return run_refusal(run) if run.status == RunStatus.STOPPED else None


def agent_suspended(agent: Agent) -> CallError:
    return call_error(kernel.standing_refusal(agent_facts(agent), kernel.RunState()))


def frozen_refusal(tenant: Tenant, effect: str) -> CallError | None:
    """A frozen tenant runs reads only: `tenant_frozen` for any other effect."""
    refusal = kernel.frozen_refusal(tenant_facts(tenant), effect)
    return call_error(refusal) if refusal is not None else None


def recorded_skill(call) -> ResolvedSkill | None:
    """The skill version a recorded call was decided for, as its run's snapshot resolves it (None: gone)."""
    run = call.run
    skill = builtin_tools.resolve(call.name, call.requested_version or None, run=run, index=index_for(run.snapshot))
    return skill if skill is not None and skill.skill_version_id == call.skill_version_id else None


def recorded_call_refusal(*, path: Path, call, arguments: dict | None, approved_verdict: str) -> CallError | None:
    """`live_refusal` for a recorded call about to act (an approved resume, a client's result, a job's end)."""
    return live_refusal(
        path=path,
        run=call.run,
        skill=recorded_skill(call),
        name=call.name,
        arguments=arguments,
        approved_verdict=approved_verdict,
    )


def live_refusal(
    *,
    path: Path,
    run: Run,
    skill: ResolvedSkill | None,
    arguments: dict | None,
    approved_verdict: str,
    policies: ActivePolicies | None = None,
    name: str = "",
) -> CallError | None:
    """The reason this decided call must not act now, or None: the kernel asked again with the state as of
    this moment. One query, plus the gate caches' loads when the generation moved since they were filled.

    `arguments=None` skips the policy: a long-running job's end delivers what already ran, and its
    raw arguments are gone by then.
    """
    ruling = live_ruling(
        path=path,
        run=run,
        skill=skill,
        name=name,
        arguments=arguments,
        approved_verdict=approved_verdict,
        policies=policies,
    )
    return ruling_error(ruling) if ruling is not None else NotPermitted("The run no longer exists.", code="run_closed")


def live_ruling(
    *,
    path: Path,
    run: Run,
    skill: ResolvedSkill | None,
    arguments: dict | None,
    approved_verdict: str | None,
    policies: ActivePolicies | None = None,
    name: str = "",
) -> kernel.Ruling | None:
    """The kernel's ruling with the run, agent, tenant, grants, skill standing and policies as they are now
    (None when the run is gone). `approved_verdict=None`: the call was not decided before (an owner's
    preview of an edit is judged as the approval it would become)."""
    live = _live_state(run)
    if live is None:
        return None
    fresh_run, generation = live
    policies = policies or gate_cache.active_policies(generation=generation)
    facts = kernel.Facts(
        path=path,
        agent=agent_facts(fresh_run.agent),
        tenant=tenant_facts(fresh_run.tenant),
        run=run_state(fresh_run),
        name=skill.name if skill else name,
        version=skill.version if skill else None,
        skill=skill_facts(skill, standing=standing_of(skill, generation=generation)) if skill else None,
        arguments=arguments,
        grants=gate_cache.active_grants(tenant_id=run.tenant_id, agent_role=run.agent.role, generation=generation),
        policies=evaluator(policies, tenant_id=run.tenant_id) if arguments is not None else None,
        approved=kernel.Approved(approved_verdict) if approved_verdict else None,
    )
    return kernel.decide(facts)


def _live_state(run: Run) -> tuple[Run, gate_cache.Generation] | None:
    """The run with its status, taint, agent standing and tenant freeze as just read, and the gate generation."""
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
        return None
    (status, status_reason, stopped_by, tainted, taint_source, agent_revoked_at, *held, epoch, number) = row
    fresh = copy(run)
    fresh.status, fresh.status_reason, fresh.stopped_by_label = status, status_reason, stopped_by
    fresh.tainted, fresh.taint_source = tainted, taint_source
    fresh.agent, fresh.tenant = _live_agent(run, agent_revoked_at, *held[:4]), _live_tenant(run, *held[4:])
    return fresh, ((epoch, number) if epoch is not None else None)  # no generation row: every lookup reads live


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


def replacement_of(skill: ResolvedSkill) -> str | None:
    """The skill its owners named to replace this version, as recorded now (it may postdate the snapshot)."""
    live = SkillVersion.objects.filter(pk=skill.skill_version_id).values_list("replacement__name", flat=True).first()
    return live or skill.replacement_name


def decision_on(call, arguments: dict) -> Decision | None:
    """The policy's verdict, now, on a recorded call with other arguments (an approver's edit)."""
    run, skill = call.run, recorded_skill(call)
    if skill is None:
        return None
    ruling = live_ruling(
        path=Path.APPROVED_RESUME,
        run=run,
        skill=skill,
        arguments=arguments,
        approved_verdict=None,
        policies=load_active_policies(),
    )
    return ruling.decision if ruling is not None else None


__all__ = [
    "CALLABLE_STATUSES",
    "agent_facts",
    "agent_suspended",
    "call_error",
    "decision_on",
    "errors_in",
    "evaluator",
    "frozen_refusal",
    "live_refusal",
    "live_ruling",
    "recorded_call_refusal",
    "recorded_skill",
    "replacement_of",
    "ruling_error",
    "run_refusal",
    "run_state",
    "skill_facts",
    "standing_of",
    "stopped_refusal",
    "tenant_facts",
]
