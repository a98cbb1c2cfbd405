"""The decision kernel: one function, `decide`, that every path able to run or judge a tool call asks.

A path gathers the facts it holds about one call (`Facts`) and the kernel answers in one fixed order:

1. the agent and the run: a revoked key, a suspended agent, a run a person stopped, a closed run;
2. the decision bundle, when the call is decided from one: expired, or the agent's role not opted in;
3. the skill: unknown to this audience (a version staged for another tenant is unknown too), retired;
4. the arguments against the input schema;
5. the tenant's freeze (only reads run in a frozen tenant);
6. the offer and the grants (`permission.refusal`);
7. the agent's rate limit (a refused call still counts: over the limit, that is the answer);
8. the policies, with the floors (`engine.evaluate`, through the path's evaluator);
9. what a person already decided: a call approved earlier may act only if the verdict on its final
   arguments is no worse than the one approved; a page of a result skips `confirm` only when the call that
   produced it was approved under the same rule.

What differs between paths is which facts they hold (a long job's end no longer has its arguments; only the
SDK decides from a bundle), never the order. Pure Python: the server and the SDK import it alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from airlock_sdk.policy import engine, permission
from airlock_sdk.policy.context import approval_required, call_context

READ = "read"
VERDICT_RANK = {"allow": 0, "confirm": 1, "deny": 2}


class Path(StrEnum):
    """Every way a tool call can be run or judged. tests/security/test_decision_matrix.py drives each one
    against each refusal; a path missing here fails tests/security/test_decision_paths.py."""

    REST_GATE = "rest_gate"  # POST /api/v1/runs/{id}/calls
    MCP_GATEWAY = "mcp_gateway"  # tools/call on /mcp
    PIPELINE_STEP = "pipeline_step"  # a step of a multi-step pipeline (reliability.sagas)
    APPROVED_RESUME = "approved_resume"  # the worker executing an approved call
    CLIENT_RESULT = "client_result"  # the result of a skill the agent's SDK ran
    LONG_JOB_END = "long_job_end"  # a long-running job delivering its outcome
    RESULT_PAGE = "result_page"  # a further page of a kept result
    DESCRIBE_RESULT = "describe_result"  # a result the context budget replaced, asked for in full
    TRY = "try"  # an owner trying a version (console and API)
    MANIFEST_TEST = "manifest_test"  # a version's manifest tests, before it publishes
    LOCAL_SDK = "local_sdk"  # the SDK deciding from its signed bundle while Airlock is unreachable
    UPLOAD_REVIEW = "upload_review"  # a locally decided call judged again when it is uploaded


@dataclass(frozen=True)
class Agent:
    id: int | str
    name: str
    role: str
    revoked: bool = False
    suspended: bool = False
    suspension_notice: str = ""
    suspended_until: str | None = None


@dataclass(frozen=True)
class Tenant:
    id: int
    slug: str
    frozen: bool = False
    frozen_by: str = ""
    freeze_reason: str = ""


@dataclass(frozen=True)
class RunState:
    open: bool = True
    status: str = "running"
    stopped: bool = False
    stopped_by: str = ""
    stop_reason: str = ""
    end_user: str = ""
    end_user_roles: tuple[str, ...] = ()
    tainted: bool = False
    taint_source: str = ""


CALLABLE = "callable"
RETIRED = "retired"
SUNSET = "sunset"


@dataclass(frozen=True)
class Skill:
    """The version as it reaches this audience. `reaches_audience` is False for a version staged only for
    other tenants (a canary), or for a share of runs this run is outside (airlock_sdk.policy.audience): to
    this call it does not exist."""

    name: str
    version: str
    effect: str
    data_class: str
    namespace: str
    manifest: dict
    builtin: bool = False
    standing: str = CALLABLE
    reaches_audience: bool = True
    replacement: str | None = None


@dataclass(frozen=True)
class Bundle:
    """The signed decision bundle a local decision was (or is being) made from."""

    number: int
    expired: bool
    valid_until: str = ""
    opted_in: bool = True


@dataclass(frozen=True)
class Approved:
    """This very call was decided before and is about to act: the verdict a person (or the gate) gave it."""

    verdict: str


@dataclass(frozen=True)
class CoveredBy:
    """An earlier call whose result this one reads (a page): the rule a person approved it under, if any."""

    approved_rule: str = ""


PolicyEvaluator = Callable[[dict, bool], engine.Decision]
RateMeter = Callable[[bool], "Refusal | None"]


@dataclass(frozen=True)
class Facts:
    path: Path
    agent: Agent
    tenant: Tenant
    run: RunState
    name: str
    version: str | None
    skill: Skill | None
    arguments: Any = None
    argument_errors: Sequence[dict] | None = None  # None: this path does not hold the arguments any more
    grants: Sequence[tuple[str, Sequence[str]]] = ()
    policies: PolicyEvaluator | None = None  # None: no arguments to judge (a long job's end)
    rate_meter: RateMeter | None = None  # counts the call; answers the refusal when over a limit
    bundle: Bundle | None = None
    approved: Approved | None = None
    covered_by: CoveredBy | None = None


@dataclass(frozen=True)
class Refusal:
    """A typed refusal: `error_class` and `code` as in the error table (docs/api.md)."""

    error_class: str
    code: str
    message: str
    extra: dict = field(default_factory=dict)


@dataclass
class Ruling:
    """The kernel's answer: `refuse` (with the refusal), or the verdict `allow`, `confirm` or `deny` with the
    policy's decision and the context it saw."""

    verdict: str
    refusal: Refusal | None = None
    decision: engine.Decision | None = None
    context: dict | None = None
    covered: bool = False  # a confirm the earlier approval of the producing call covers

    @property
    def refused(self) -> bool:
        return self.verdict == "refuse"


def _refuse(error_class: str, code: str, message: str, **extra: Any) -> Ruling:
    return Ruling("refuse", Refusal(error_class, code, message, extra))


def standing_refusal(agent: Agent, run: RunState) -> Refusal | None:
    """Step 1 alone: why nothing may run for this agent in this run now."""
    if agent.revoked:
        return Refusal("authorization", "agent_revoked", "The agent's key was revoked; nothing runs for it any more.")
    if agent.suspended:
        return Refusal(
            "authorization", "agent_suspended", agent.suspension_notice, {"suspended_until": agent.suspended_until}
        )
    if run.stopped:
        return Refusal(
            "authorization",
            "run_stopped",
            f"{run.stopped_by or 'An operator'} stopped this run: {run.stop_reason or 'no reason given'}. "
            "Nothing more runs in it; do not retry.",
            {"stopped_by": run.stopped_by, "reason": run.stop_reason},
        )
    if not run.open:
        return Refusal("authorization", "run_closed", f"The run is {run.status}; nothing more runs in it.")
    return None


def frozen_refusal(tenant: Tenant, effect: str) -> Refusal | None:
    """Step 5 alone: a frozen tenant runs reads only."""
    if not tenant.frozen or effect == READ:
        return None
    reason = f": {tenant.freeze_reason}" if tenant.freeze_reason else ""
    return Refusal(
        "authorization",
        "tenant_frozen",
        f"{tenant.frozen_by or 'An admin'} froze tenant {tenant.slug}{reason}. Only reads run until it is unfrozen.",
    )


def _bundle_refusal(bundle: Bundle) -> Ruling | None:
    if bundle.expired:
        return _refuse(
            "unavailable", "bundle_expired", f"decision bundle {bundle.number} expired at {bundle.valid_until}"
        )
    if not bundle.opted_in:
        return _refuse("unavailable", "local_decisions_off", "this agent's role may not decide locally")
    return None


def _skill_refusal(facts: Facts) -> Ruling | None:
    skill, acting = facts.skill, facts.approved is not None
    if acting and (skill is None or not skill.reaches_audience):  # decided, and gone from the registry since
        return _refuse("authorization", "skill_retired", f"{facts.name} is no longer callable.")
    if skill is None or not skill.reaches_audience:
        what = f"{facts.name} {facts.version}" if facts.version else facts.name
        return _refuse("not_found", "unknown_skill", f"There is no callable skill {what}.")
    if skill.standing == CALLABLE or skill.builtin:
        return None
    if skill.standing == SUNSET:
        message = f"{skill.name} {skill.version} passed its sunset; it no longer runs."
    elif acting:
        instead = f". Use {skill.replacement} instead." if skill.replacement else "."
        message = f"{skill.name} {skill.version} was retired; it no longer runs{instead}"
    else:
        instead = f"; use {skill.replacement} instead." if skill.replacement else "."
        message = f"{skill.name} {skill.version} was retired after this run started{instead}"
    if acting or skill.standing == SUNSET:  # a decided call about to act: it is no longer permitted
        return _refuse("authorization", "skill_retired", message, replacement=skill.replacement)
    return _refuse("not_found", "retired", message, replacement=skill.replacement)


def _argument_refusal(facts: Facts) -> Ruling | None:
    errors = facts.argument_errors
    if not errors:
        return None
    skill = facts.skill
    message = f"The arguments do not match {skill.name} {skill.version}: " + "; ".join(
        f"{e['field']}: {e['message']}" for e in list(errors)[:5]
    )
    return _refuse("validation", "invalid_arguments", message, fields=list(errors), schema_version=skill.version)


def _permission_refusal(facts: Facts) -> Ruling | None:
    skill = facts.skill
    if skill.builtin:
        return None  # find_tools and describe_tool answer only within what the run may call already
    refused = permission.refusal(
        name=skill.name,
        manifest=skill.manifest,
        tenant_slug=facts.tenant.slug,
        agent_role=facts.agent.role,
        grants=[(pattern, list(scopes)) for pattern, scopes in facts.grants],
    )
    if refused is None:
        return None
    if facts.approved is not None:  # it was permitted when decided: the grant went away since
        return _refuse("authorization", "grant_revoked", f"The grant for {skill.name} was revoked: {refused.message}")
    return _refuse("authorization", refused.code, refused.message, no_grant=refused.no_grant)


def context_for(facts: Facts) -> dict:
    """The documented context policies see (docs/policies.md)."""
    skill = facts.skill
    return call_context(
        skill={
            "name": skill.name,
            "version": skill.version,
            "effect": skill.effect,
            "data_class": skill.data_class,
            "namespace": skill.namespace,
        },
        arguments=facts.arguments if isinstance(facts.arguments, dict) else {},
        agent_id=facts.agent.id,
        agent_name=facts.agent.name,
        agent_role=facts.agent.role,
        end_user=facts.run.end_user,
        end_user_roles=facts.run.end_user_roles,
        tenant_slug=facts.tenant.slug,
        tainted=facts.run.tainted,
        taint_source=facts.run.taint_source,
    )


def _judged(facts: Facts) -> Ruling:
    if facts.policies is None:
        return Ruling("allow")
    context = context_for(facts)
    decision = facts.policies(context, approval_required(facts.skill.manifest))
    ruling = Ruling(decision.verdict, decision=decision, context=context)
    if facts.approved is not None and VERDICT_RANK[decision.verdict] > VERDICT_RANK[facts.approved.verdict]:
        refusal = Refusal(
            "declined",
            "policy_changed",
            f"The policy now answers {decision.verdict} for this call: {decision.reason}",
            {"rule_id": decision.rule_id, "policy_version": decision.policy_version or None},
        )
        return Ruling("refuse", refusal, decision=decision, context=context)
    covered = facts.covered_by
    if decision.verdict == "confirm" and covered is not None and covered.approved_rule == _confirming_rule(decision):
        ruling.verdict, ruling.covered = "allow", True
    return ruling


def _confirming_rule(decision: engine.Decision) -> str:
    """What a person approved when they approved this verdict: the floor if one raised it, else the rule."""
    return decision.floor_id or decision.rule_id


def approved_rule(decision: dict) -> str:
    """The same, read back from a call's recorded decision (its `as_dict()`)."""
    return decision.get("floor_id") or decision.get("rule_id") or ""


def decide(facts: Facts) -> Ruling:
    """The ruling on one call, in the kernel's fixed order (see the module docstring)."""
    refusal = standing_refusal(facts.agent, facts.run)
    if refusal is not None:
        return Ruling("refuse", refusal)
    ruling = (
        (_bundle_refusal(facts.bundle) if facts.bundle is not None else None)
        or _skill_refusal(facts)
        or _argument_refusal(facts)
    )
    if ruling is None:
        frozen = frozen_refusal(facts.tenant, facts.skill.effect)
        ruling = Ruling("refuse", frozen) if frozen is not None else _permission_refusal(facts)
    if facts.rate_meter is not None:
        limited = facts.rate_meter(ruling is None)
        if limited is not None:
            return Ruling("refuse", limited)
    return ruling or _judged(facts)


__all__ = [
    "CALLABLE",
    "RETIRED",
    "SUNSET",
    "Agent",
    "Approved",
    "Bundle",
    "CoveredBy",
    "Facts",
    "Path",
    "Refusal",
    "RunState",
    "Ruling",
    "Skill",
    "Tenant",
    "approved_rule",
    "context_for",
    "decide",
    "frozen_refusal",
    "standing_refusal",
]
