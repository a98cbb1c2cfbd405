"""Owners try a version before it ships, and its manifest `tests` gate publishing.

Both ask the decision kernel like every other path (`airlock_sdk.policy.kernel`, facts from
`runs.authorization`): the arguments, the tenant's freeze, the offer and grants, the policies, as an agent of
the chosen role in the owner's tenant would get them. Only what the ruling lets run is called: never a deny
or a refusal; a confirm only against a sandbox (no person approves a try). The call goes through
`runs.execution` and the execution plane, the result through `runs.shaping`. What differs is where the call
goes (`registry.trials.try_target`: the sandbox, or a read's own target) and what is left behind: a
`SkillTry` or `SkillTestRun`, never a run, a call, a span, a breaker transition or a reconciliation, so no
try counts in the skill's production figures.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from airlock_sdk.policy import kernel
from airlock_sdk.policy.kernel import Path
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from console.models import Tenant
from console.tenancy import tenant_for_user_or_404, tenant_ids_for, tenants_for
from policies import grants as grant_lookup
from policies.services import load_active_policies
from registry import trials as registry_trials
from registry.models import SkillTestRun, SkillTry, SkillVersion, TryOutcome, VersionStatus
from registry.snapshots import ResolvedSkill
from runs import authorization, execution
from runs.adapters import InvocationContext
from runs.shaping import shape
from traces.redaction import redact

NotTriable = registry_trials.NotTriable
ANY_TENANT = "*"  # no tenant chosen: offered as to every tenant, as the manifest's `allowed_tenants: ["*"]` says


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


def _facts(
    skill: ResolvedSkill, version: SkillVersion, arguments: Any, *, role: str, tenant: Tenant | None, path: Path
) -> kernel.Facts:
    """What a try knows: an agent of `role` (no agent exists: none is revoked or suspended) in `tenant` with
    its grants and freeze, in an open run that read nothing untrusted. Without a tenant (a manifest test that
    names none, an owner in no tenant) the question is what the platform's and the skill's rules say once some
    tenant grants the skill: a grant is assumed, and only a sandbox is ever called (`may_run`)."""
    if tenant is not None:
        grants = grant_lookup.active_grants(tenant_id=tenant.pk, agent_role=role)
    else:
        grants = [(skill.name, [])]
    return kernel.Facts(
        path=path,
        agent=kernel.Agent(id=0, name=f"(a {role} agent)", role=role),
        tenant=authorization.tenant_facts(tenant) if tenant is not None else kernel.Tenant(id=0, slug=ANY_TENANT),
        run=kernel.RunState(),
        name=skill.name,
        version=skill.version,
        skill=authorization.skill_facts(skill),
        arguments=arguments,
        argument_errors=authorization.errors_in(replace(skill, skill_version_id=f"try:{version.pk}"), arguments),
        grants=grants,
        policies=authorization.evaluator(load_active_policies(), tenant_id=tenant.pk if tenant else 0),
    )


def _verdict_shown(ruling: kernel.Ruling) -> dict:
    """The ruling as the why panel shows it: the policy's decision, or the refusal as a deny."""
    if ruling.refused:
        refusal = ruling.refusal
        return {"verdict": "deny", "rule_id": refusal.code, "reason": refusal.message, "scope": "permissions"}
    return {**ruling.decision.as_dict(), "verdict": ruling.verdict}


def may_run(ruling: kernel.Ruling, target: registry_trials.Target, tenant: Tenant | None) -> str:
    """Why this try must not call its target (empty when it may): only what the verdict allows runs; a
    confirm runs only against a sandbox, since no person approves a try; without a tenant, no tenant's grant
    allows the real target either."""
    if tenant is None and not target.is_sandbox:
        return "Not run: without a tenant whose grants allow it, only a sandbox is called."
    if ruling.refused:
        return f"Not run: {ruling.refusal.message}"
    if ruling.verdict == "deny":
        return f"Not run: the verdict is deny ({ruling.decision.rule_id}): {ruling.decision.reason}"
    if ruling.verdict == "confirm" and not target.is_sandbox:
        return "Not run: the verdict is confirm and no person approves a try; it runs only against a sandbox."
    return ""


def attempt_call(
    version: SkillVersion,
    arguments: Any,
    *,
    role: str,
    tenant: Tenant | None,
    execute: bool = True,
    path: Path = Path.TRY,
) -> Attempt:
    """Validate and decide (the kernel), then call the try target when the ruling lets it run and `execute`.
    Raises NotTriable before anything else."""
    target = registry_trials.try_target(version.manifest, version.skill.owner_team.slug)
    skill = resolved(version)
    attempt = Attempt(target=target)
    attempt.why["target"] = {"adapter": target.adapter, "reason": target.reason}
    attempt.why["tenant"] = tenant.slug if tenant else ""
    ruling = kernel.decide(_facts(skill, version, arguments, role=role, tenant=tenant, path=path))
    if ruling.refused and ruling.refusal.code == "invalid_arguments":
        attempt.outcome = TryOutcome.INVALID
        attempt.error = authorization.call_error(ruling.refusal).as_error()
        attempt.why["validation"] = {"passed": False, "fields": ruling.refusal.extra.get("fields", [])}
        return attempt
    attempt.why["validation"] = {"passed": True}
    if not role:
        attempt.verdict = {"verdict": "", "reason": "No agent role chosen: the verdict depends on it."}
        if execute:
            message = "Not run: choose an agent role; the verdict, and so whether it may run, depend on it."
            attempt.outcome, attempt.error = TryOutcome.NOT_RUN, {"code": "no_role", "message": message}
        return attempt
    attempt.verdict = attempt.why["decision"] = _verdict_shown(ruling)
    if not execute:
        return attempt
    refusal = may_run(ruling, target, tenant)
    if refusal:
        attempt.outcome, attempt.error = TryOutcome.NOT_RUN, {"code": "not_run", "message": refusal}
        return attempt
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
        elif attempt.outcome == TryOutcome.NOT_RUN and not test.get("verdict"):
            failures.append(attempt.error.get("message", "the call was not run"))
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


def _test_tenant(slug: str, user: Any) -> Tenant | None:
    """The tenant a manifest test names, if the person running the tests belongs to it (or runs them as the
    platform: `manage.py test_skills`, no user). A test cannot learn another tenant's verdicts."""
    tenants = Tenant.objects.all() if user is None or user.is_superuser else tenants_for(user)
    return tenants.filter(slug=slug).first()


def _run_one(version: SkillVersion, test: dict, user: Any) -> dict:
    tenant = _test_tenant(test["tenant"], user) if test.get("tenant") else None
    if test.get("tenant") and tenant is None:
        failure = f"you belong to no tenant {test['tenant']}: a test may name only tenants its author belongs to"
        return {"name": test["name"], "passed": False, "failures": [failure]}
    try:
        attempt = attempt_call(
            version,
            test["arguments"],
            role=test.get("role", ""),
            tenant=tenant,
            execute=test.get("valid", True),
            path=Path.MANIFEST_TEST,
        )
    except NotTriable as exc:
        return {"name": test["name"], "passed": False, "failures": [str(exc)]}
    failures = _test_failures(test, attempt)
    return {"name": test["name"], "passed": not failures, "failures": failures, "target": attempt.target.adapter}


def run_skill_tests(*, version: SkillVersion, trigger: str, user: Any) -> SkillTestRun:
    """Run the version's manifest tests in order and record the outcome (receiver of registry.hooks)."""
    results = [_run_one(version, test, user) for test in version.manifest.get("tests") or []]
    return registry_trials.record_test_run(
        version=version, manifest=version.manifest, trigger=trigger, ran_by=user, results=results
    )
