"""Owners try a version before it ships, and its manifest `tests` gate publishing.

Both go through the gate's own steps, not a second pipeline: `runs.validation` for the arguments,
`runs.authorization` for the verdict (as the chosen agent role in the owner's tenant would get it, or with
no tenant), `runs.execution` and the execution plane for the call, `runs.shaping` for the result. What
differs is where the call goes (`registry.trials.try_target`: the sandbox, or a read's own target) and what
is left behind: a `SkillTry` or `SkillTestRun`, never a run, a call, a span, a breaker transition or a
reconciliation, so no try counts in the skill's production figures.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from console.models import Tenant
from console.tenancy import tenant_for_user_or_404, tenant_ids_for, tenants_for
from policies import grants as grant_lookup
from policies.services import load_active_policies
from registry import trials as registry_trials
from registry.models import SkillTestRun, SkillTry, SkillVersion, TryOutcome, VersionStatus
from registry.offering import offers_role
from registry.snapshots import ResolvedSkill
from runs import authorization, execution
from runs.adapters import InvocationContext
from runs.errors import NotPermitted, ValidationFailed
from runs.shaping import shape
from runs.validation import validate_arguments
from traces.redaction import redact

NotTriable = registry_trials.NotTriable


@dataclass
class Attempt:
    """What one try produced, before it is recorded."""

    target: registry_trials.Target
    outcome: str = TryOutcome.OK
    error: dict = field(default_factory=dict)
    verdict: dict = field(default_factory=dict)
    result: Any = None
    why: dict = field(default_factory=dict)
    span: dict = field(default_factory=dict)


def resolved(version: SkillVersion) -> ResolvedSkill:
    """The version as the gate sees a skill, whatever its status (a draft is in no snapshot)."""
    skill = version.skill
    return ResolvedSkill(
        skill_version_id=version.pk,
        skill_id=skill.skill_id,
        name=skill.name,
        namespace=skill.namespace,
        version=version.version,
        status=version.status,
        effect=version.effect,
        data_classification=version.data_classification,
        manifest=version.manifest,
        replacement_name=None,
        deprecated=False,
        skill_pk=skill.pk,
        owner_team=skill.owner_team.slug,
    )


def verdict_for(skill: ResolvedSkill, arguments: dict, *, role: str, tenant: Tenant | None) -> dict:
    """The gate's verdict for an agent of `role` in `tenant` (None: no tenant, so no grant and only the
    platform's and the skill's policies), as the why panel shows it."""
    if not role:
        return {"verdict": "", "reason": "No agent role chosen: the verdict depends on it."}
    facts = authorization.RunFacts(
        tenant_id=tenant.pk if tenant else 0,
        tenant_slug=tenant.slug if tenant else "",
        agent_id=0,
        agent_name=f"(a {role} agent)",
        agent_role=role,
        end_user="",
        end_user_roles=(),
        tainted=False,
        taint_source="",
    )
    try:
        if tenant is not None:
            grants = grant_lookup.active_grants(tenant_id=tenant.pk, agent_role=role)
            authorization.permitted(skill, facts, grants)
        elif not offers_role(skill.manifest, role):
            raise NotPermitted(f"{skill.name} is not for agents with the role {role}.", code="role_not_allowed")
    except NotPermitted as exc:
        return {"verdict": "deny", "rule_id": exc.code, "reason": exc.message, "scope": "permissions"}
    decision = authorization.decide(skill, facts, arguments, policies=load_active_policies())
    return decision.as_dict()


def attempt_call(
    version: SkillVersion, arguments: Any, *, role: str, tenant: Tenant | None, execute: bool = True
) -> Attempt:
    """Validate, decide and (when `execute`) call the try target. Raises NotTriable before anything else."""
    manifest = version.manifest
    target = registry_trials.try_target(manifest)
    skill = resolved(version)
    attempt = Attempt(target=target)
    attempt.why["target"] = {"adapter": target.adapter, "reason": target.reason}
    attempt.why["tenant"] = tenant.slug if tenant else ""
    try:
        validate_arguments(
            skill_version_id=f"try:{version.pk}",
            schema=manifest.get("input_schema"),
            version=version.version,
            name=skill.name,
            arguments=arguments,
        )
    except ValidationFailed as exc:
        attempt.outcome, attempt.error = TryOutcome.INVALID, exc.as_error()
        attempt.why["validation"] = {"passed": False, "fields": exc.extra.get("fields", [])}
        return attempt
    attempt.why["validation"] = {"passed": True}
    attempt.verdict = verdict_for(skill, arguments, role=role, tenant=tenant)
    attempt.why["decision"] = attempt.verdict
    if execute:
        _execute(attempt, version, arguments, role=role, tenant=tenant)
    return attempt


def _execute(attempt: Attempt, version: SkillVersion, arguments: dict, *, role: str, tenant: Tenant | None) -> None:
    manifest = registry_trials.trial_manifest(version.manifest, attempt.target)
    key = f"try-{uuid.uuid4().hex}"
    context = InvocationContext(
        run_id="",
        call_id=key,
        tenant=tenant.slug if tenant else "",
        agent_role=role,
        end_user="",
        idempotency_key=key,
        trial=True,
    )
    outcome = execution.execute(manifest=manifest, effect=version.effect, arguments=arguments, context=context)
    trail = outcome.trail
    attempt.span = {
        "name": f"try {version.skill.name} {version.version}",
        "target": attempt.target.adapter,
        "started_at": outcome.started_at.isoformat() if outcome.started_at else "",
        "duration_ms": _duration_ms(outcome),
        "attempts": [
            {"number": a.number, "error_class": a.error_class, "code": a.code, "retry_in_s": a.retry_in_s}
            for a in getattr(trail, "attempts", None) or []
        ],
    }
    if getattr(trail, "contract_violation", ""):
        attempt.why["contract_violation"] = trail.contract_violation
    if outcome.error is not None:
        attempt.outcome, attempt.error = TryOutcome.ERROR, outcome.error.as_error()
        return
    shaped = shape(
        outcome.content,
        manifest["execution"].get("result_limit_bytes"),
        output_schema=manifest.get("output_schema"),
    )
    attempt.result, attempt.why["shaping"] = shaped.content, shaped.summary


def _duration_ms(outcome: execution.Outcome) -> int:
    if outcome.started_at is None or outcome.finished_at is None:
        return 0
    return int((outcome.finished_at - outcome.started_at).total_seconds() * 1000)


def _tenant_of(user, slug: str) -> Tenant | None:
    """The tenant whose grants and policies decide: one the user belongs to (404 otherwise), else their first."""
    if slug:
        return tenant_for_user_or_404(user, slug)
    return tenants_for(user).order_by("name").first()


def may_try(version: SkillVersion, user) -> bool:
    return version.skill.is_owned_by(user)


def version_for_owner(*, name: str, version: str, user) -> SkillVersion:
    """The version an owner opens to try or test: 404 when it does not exist, 403 for anyone else."""
    found = get_object_or_404(
        SkillVersion.objects.select_related("skill__owner_team"), skill__name=name, version=version
    )
    if not may_try(found, user):
        raise PermissionDenied(f"Only the {found.skill.owner_team.slug} team or a platform admin may try {name}.")
    return found


def try_version(*, version: SkillVersion, user, arguments: Any, role: str = "", tenant: str = "", via: str) -> SkillTry:
    """An owner calls `version` against its try target and the try is recorded (who, when, what happened)."""
    if not may_try(version, user):
        raise PermissionDenied(f"Only the {version.skill.owner_team.slug} team or a platform admin may try it.")
    if version.status == VersionStatus.RETIRED:
        raise NotTriable(f"{version} is retired; it cannot be called at all.")
    chosen = _tenant_of(user, tenant)
    attempt = attempt_call(version, arguments, role=role, tenant=chosen)
    return registry_trials.record_try(
        version=version,
        tried_by=user,
        tenant=chosen,
        agent_role=role,
        via=via,
        target=attempt.target.adapter,
        arguments=redact(arguments, schema=version.manifest.get("input_schema")) if isinstance(arguments, dict) else {},
        outcome=attempt.outcome,
        error_code=attempt.error.get("code", ""),
        verdict=attempt.verdict.get("verdict", ""),
        result=attempt.result if attempt.outcome == TryOutcome.OK else {"error": attempt.error},
        why=attempt.why,
        span=attempt.span,
    )


def try_data(found: SkillTry, reader) -> dict:
    """A try as its reader may see it: the verdict and its reasons only when the reader is in that tenant."""
    in_tenant = found.tenant_id is None or found.tenant_id in tenant_ids_for(reader) or reader.is_superuser
    why = found.why if in_tenant else {k: v for k, v in found.why.items() if k != "decision"}
    return {
        "id": found.pk,
        "skill": found.version.skill.name,
        "version": found.version.version,
        "tried_by": getattr(found.tried_by, "username", ""),
        "tenant": found.tenant.slug if found.tenant else None,
        "agent_role": found.agent_role,
        "via": found.via,
        "target": found.target,
        "outcome": found.outcome,
        "verdict": found.verdict if in_tenant else "",
        "result": found.result,
        "why": why,
        **({"span": found.span} if found.span else {}),  # nothing was called: no span
        "created_at": found.created_at,
    }


def _test_failures(test: dict, attempt: Attempt) -> list[str]:
    failures = []
    if test.get("valid", True):
        if attempt.outcome == TryOutcome.INVALID:
            failures.append(f"the arguments were refused: {attempt.error.get('message')}")
        elif attempt.outcome == TryOutcome.ERROR:
            failures.append(f"the call failed with {attempt.error.get('code')}: {attempt.error.get('message')}")
    elif attempt.outcome != TryOutcome.INVALID:
        failures.append("the arguments were accepted; the test expects a validation error")
    else:
        named = {f["field"] for f in attempt.why["validation"]["fields"]}
        missing = [name for name in test.get("error_fields") or [] if name not in named]
        if missing:
            failures.append(
                f"the validation error does not name {', '.join(missing)} (it names {', '.join(sorted(named))})"
            )
    expected = test.get("verdict")
    got = attempt.verdict.get("verdict")
    if expected and attempt.outcome != TryOutcome.INVALID and got != expected:
        # The verdict only: a tenant's rules and grants are its own, and a test's reader may not be in it.
        failures.append(f"the verdict for {test.get('role')} is {got}, not {expected}")
    return failures


def _run_one(version: SkillVersion, test: dict) -> dict:
    tenant = Tenant.objects.filter(slug=test["tenant"]).first() if test.get("tenant") else None
    if test.get("tenant") and tenant is None:
        return {"name": test["name"], "passed": False, "failures": [f"there is no tenant {test['tenant']}"]}
    try:
        attempt = attempt_call(
            version, test["arguments"], role=test.get("role", ""), tenant=tenant, execute=test.get("valid", True)
        )
    except NotTriable as exc:
        return {"name": test["name"], "passed": False, "failures": [str(exc)]}
    failures = _test_failures(test, attempt)
    return {"name": test["name"], "passed": not failures, "failures": failures, "target": attempt.target.adapter}


def run_skill_tests(*, version: SkillVersion, trigger: str, user: Any) -> SkillTestRun:
    """Run the version's manifest tests in order and record the outcome (receiver of registry.hooks)."""
    results = [_run_one(version, test) for test in version.manifest.get("tests") or []]
    return registry_trials.record_test_run(
        version=version, manifest=version.manifest, trigger=trigger, ran_by=user, results=results
    )
