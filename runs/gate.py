"""The gate: every proposed tool call is resolved, validated, authorized and judged before anything runs.

`process_batch(run=..., calls=[...])` returns one result per call, in the order given. Decisions
are made in call order (a call marked `taint`, or an allowed skill whose output is untrusted,
taints every later decision of the batch); then allowed reads run concurrently and every other
effect runs one at a time, in order. Any failure inside the gate fails closed: the call gets an
`internal` error and nothing executes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from lib.canonical import sha256_of
from lib.sealing import seal
from policies import grants as grant_lookup
from policies.engine import Decision
from policies.services import ActivePolicies, evaluate_with_shadow, load_active_policies
from registry.models import MUTATING_EFFECTS, SkillVersion, VersionStatus
from registry.snapshots import ResolvedSkill, SnapshotIndex, index_for
from runs import execution, ratelimit, recording
from runs.adapters import InvocationContext
from runs.errors import GENERIC_INTERNAL, CallError, Internal, NotFound, NotPermitted, Transient, ValidationFailed
from runs.models import CallStatus, IdempotencyRecord, Run, ToolCall
from runs.validation import validate_arguments
from traces.redaction import redact

logger = logging.getLogger(__name__)
MAX_BATCH = 50
CALLABLE_STATUSES = {VersionStatus.ACTIVE, VersionStatus.DEPRECATED}


@dataclass
class Planned:
    """One call of a batch on its way through the gate."""

    position: int
    raw: dict
    call_id: str = ""
    result: dict | None = None
    skill: ResolvedSkill | None = None
    arguments: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    decision: Decision | None = None
    tool_call: ToolCall | None = None
    idempotency_key: str = ""
    idempotency_record: IdempotencyRecord | None = None
    outcome: execution.Outcome | None = None
    call_id_reused: bool = False

    @property
    def effect(self) -> str:
        return self.skill.effect if self.skill else ""


@dataclass
class BatchState:
    run: Run
    index: SnapshotIndex
    live_status: dict[int, str]
    grants: list[tuple[str, list[str]]]
    policies: ActivePolicies
    existing: dict[str, ToolCall]
    records: dict[str, IdempotencyRecord]
    tainted: bool
    taint_source: str
    seen: set[str] = field(default_factory=set)


def error_result(call_id: str, error: CallError) -> dict:
    return {"call_id": call_id, "status": "error", "is_error": True, "error": error.as_error()}


# Decision phase ------------------------------------------------------------------------------------

def _load_state(run: Run, calls: list[dict]) -> BatchState:
    index = index_for(run.snapshot)
    resolved_ids = set()
    for raw in calls:
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            skill = index.resolve(raw["name"], raw.get("version") if isinstance(raw.get("version"), str) else None)
            if skill is not None:
                resolved_ids.add(skill.skill_version_id)
    live_status = dict(SkillVersion.objects.filter(pk__in=resolved_ids).values_list("pk", "status"))
    call_ids = [raw.get("call_id") for raw in calls if isinstance(raw, dict) and isinstance(raw.get("call_id"), str)]
    existing = {call.call_id: call for call in ToolCall.objects.filter(run=run, call_id__in=call_ids)}
    keys = {_explicit_key(raw) for raw in calls if isinstance(raw, dict)} | {f"{run.pk}:{c}" for c in call_ids}
    records = {record.key: record for record in
               IdempotencyRecord.objects.filter(tenant_id=run.tenant_id, key__in=keys - {""})
               .select_related("call")}
    return BatchState(run=run, index=index, live_status=live_status,
                      grants=grant_lookup.active_grants(tenant_id=run.tenant_id, agent_role=run.agent.role),
                      policies=load_active_policies(), existing=existing, records=records,
                      tainted=run.tainted, taint_source=run.taint_source)


def _explicit_key(raw: dict) -> str:
    key = raw.get("idempotency_key")
    return key.strip()[:300] if isinstance(key, str) else ""


def _check_shape(plan: Planned) -> None:
    raw = plan.raw
    if not isinstance(raw, dict):
        raise ValidationFailed("Each call must be an object with call_id, name and arguments.", code="malformed_call")
    call_id = raw.get("call_id")
    if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > 200:
        raise ValidationFailed("call_id must be a non-empty string (at most 200 characters).", code="malformed_call",
                               fields=[{"field": "call_id", "message": "required string"}])
    plan.call_id = call_id
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ValidationFailed("name must be the skill's name.", code="malformed_call",
                               fields=[{"field": "name", "message": "required string"}])
    if "version" in raw and raw["version"] is not None and not isinstance(raw["version"], str):
        raise ValidationFailed("version must be a string such as 1.2.0.", code="malformed_call",
                               fields=[{"field": "version", "message": "string"}])
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValidationFailed("arguments must be an object.", code="malformed_call",
                               fields=[{"field": "arguments", "message": "object"}])
    plan.arguments = arguments


def _offered(entry: dict, run: Run) -> bool:
    permissions = entry["manifest"].get("permissions", {})
    tenants, roles = permissions.get("allowed_tenants", ["*"]), permissions.get("allowed_agent_roles", ["*"])
    return ("*" in tenants or run.tenant.slug in tenants) and ("*" in roles or run.agent.role in roles)


def _available(state: BatchState) -> list[str]:
    """What this agent may call: current skills its tenant and role are offered and a grant covers."""
    names = [entry["name"] for entry in state.index.current_entries() if _offered(entry, state.run)]
    return grant_lookup.granted_names([pattern for pattern, _ in state.grants], names)


def _resolve(plan: Planned, state: BatchState) -> None:
    name, version = plan.raw["name"], plan.raw.get("version") or None
    skill = state.index.resolve(name, version)
    if skill is None:
        what = f"{name} {version}" if version else name
        raise NotFound(f"There is no callable skill {what}. Call one of the skills listed in 'available'.",
                       available=_available(state))
    live = state.live_status.get(skill.skill_version_id)
    if live not in CALLABLE_STATUSES:
        raise NotFound(f"{name} {skill.version} was retired after this run started.", code="retired",
                       available=_available(state))
    if skill.deprecated or live == VersionStatus.DEPRECATED:
        replacement = f"; use {skill.replacement_name} instead" if skill.replacement_name else ""
        plan.warnings.append(f"{name} {skill.version} is deprecated{replacement}.")
    plan.skill = skill


def _authorize(plan: Planned, state: BatchState) -> None:
    skill, run = plan.skill, state.run
    permissions = skill.manifest.get("permissions", {})
    tenants = permissions.get("allowed_tenants", ["*"])
    if "*" not in tenants and run.tenant.slug not in tenants:
        raise NotPermitted(f"{skill.name} is not offered to this tenant.", code="tenant_not_allowed")
    roles = permissions.get("allowed_agent_roles", ["*"])
    if "*" not in roles and run.agent.role not in roles:
        raise NotPermitted(f"{skill.name} is not for agents with the role {run.agent.role}.", code="role_not_allowed")
    required = set(permissions.get("oauth_scopes") or [])
    covering = [scopes for pattern, scopes in state.grants if grant_lookup.is_granted([pattern], skill.name)]
    if not covering:
        raise NotPermitted(f"No grant lets {run.agent.role} agents of {run.tenant.slug} call {skill.name}.",
                           code="no_grant", available=_available(state))
    # A grant without scopes does not restrict them; one with scopes must hold all the skill needs.
    if required and not any(not scopes or required <= set(scopes) for scopes in covering):
        raise NotPermitted(f"{skill.name} needs the scopes {', '.join(sorted(required))}, which no grant gives.",
                           code="missing_scopes")


def _context(plan: Planned, state: BatchState) -> dict:
    skill, run = plan.skill, state.run
    return {
        "skill": {"name": skill.name, "version": skill.version, "effect": skill.effect,
                  "data_class": skill.data_classification, "namespace": skill.namespace},
        "args": plan.arguments,
        "agent": {"id": run.agent_id, "name": run.agent.name, "role": run.agent.role},
        "end_user": {"id": run.end_user, "roles": list(run.end_user_roles or [])},
        "tenant": {"slug": run.tenant.slug},
        "run": {"tainted": state.tainted, "taint_source": state.taint_source},
    }


def _replay(plan: Planned, previous: ToolCall) -> dict:
    if previous.result is None:
        raise Transient("An earlier call with this idempotency key is still running.", code="in_progress",
                        retry_after=1)
    plan.warnings.append(f"Replayed the recorded outcome of call {previous.call_id}; nothing ran again.")
    result = {**previous.result, "call_id": plan.call_id}
    if result.get("status") == "ok":
        result["warnings"] = [*result.get("warnings", []), plan.warnings[-1]]
    return result


def _check_idempotency(plan: Planned, state: BatchState, sha: str) -> dict | None:
    """A recorded outcome to replay, or None to go on. Reusing a key with other arguments is refused."""
    previous = state.existing.get(plan.call_id)
    if previous is not None:
        if previous.arguments_sha256 != sha or previous.name != plan.skill.name:
            raise ValidationFailed(f"call_id {plan.call_id} was already used in this run with other arguments.",
                                   code="duplicate_call_id")
        return _replay(plan, previous)
    key = _explicit_key(plan.raw)
    if not key and plan.effect in MUTATING_EFFECTS:
        key = f"{state.run.pk}:{plan.call_id}"
    plan.idempotency_key = key
    record = state.records.get(key) if key else None
    if record is None:
        return None
    if record.arguments_sha256 != sha or record.skill_name != plan.skill.name:
        raise ValidationFailed("This idempotency key was used before with other arguments; use a new key for a "
                               "new action.", code="idempotency_key_reused")
    if record.outcome is not None:
        plan.warnings.append("Replayed the recorded outcome for this idempotency key; nothing ran again.")
        return {**record.outcome, "call_id": plan.call_id}
    if record.call is not None:
        return _replay(plan, record.call)
    raise Transient("An earlier call with this idempotency key is still running.", code="in_progress", retry_after=1)


def _new_tool_call(plan: Planned, state: BatchState, sha: str) -> ToolCall:
    skill = plan.skill
    return ToolCall(
        run=state.run, call_id=plan.call_id or f"#{plan.position}", position=plan.position,
        name=str(plan.raw.get("name", ""))[:200] if isinstance(plan.raw, dict) else "",
        requested_version=str(plan.raw.get("version") or "")[:64] if isinstance(plan.raw, dict) else "",
        skill_version_id=skill.skill_version_id if skill else None, effect=plan.effect,
        arguments=redact(plan.arguments, schema=skill.manifest.get("input_schema") if skill else None,
                         data_classification=skill.data_classification if skill else "internal"),
        arguments_sha256=sha, idempotency_key=plan.idempotency_key, warnings=plan.warnings,
    )


def _decide(plan: Planned, state: BatchState) -> None:
    _check_shape(plan)
    if plan.call_id in state.seen:
        plan.call_id_reused = True
        raise ValidationFailed(f"call_id {plan.call_id} appears twice in this batch.", code="duplicate_call_id")
    state.seen.add(plan.call_id)
    ratelimit.check_agent(state.run.agent_id)
    taint = plan.raw.get("taint")
    if taint and not state.tainted:
        state.tainted = True
        state.taint_source = (taint if isinstance(taint, str) else f"agent marked call {plan.call_id}")[:300]
    _resolve(plan, state)
    validate_arguments(skill_version_id=plan.skill.skill_version_id, schema=plan.skill.manifest.get("input_schema"),
                       version=plan.skill.version, name=plan.skill.name, arguments=plan.arguments)
    _authorize(plan, state)
    ratelimit.check_skill(plan.skill.name, plan.skill.manifest)
    sha = sha256_of(plan.arguments)
    replay = _check_idempotency(plan, state, sha)
    plan.tool_call = _new_tool_call(plan, state, sha)
    if replay is not None:
        plan.result = replay
        if plan.call_id in state.existing:  # the same call posted again: nothing new to record
            plan.tool_call = None
            return
        plan.tool_call.status = CallStatus.SUCCEEDED if replay.get("status") == "ok" else CallStatus.FAILED
        plan.tool_call.decision = {"replay": True}
        return
    risk = plan.skill.manifest.get("risk", {})
    context = _context(plan, state)
    plan.decision = evaluate_with_shadow(active=state.policies, context=context, tenant_id=state.run.tenant_id,
                                         approval_required=risk.get("approval") in ("required", "two_person"))
    plan.tool_call.verdict = plan.decision.verdict
    plan.tool_call.decision = {**plan.decision.as_dict(), "inputs": {
        "context": {k: v for k, v in context.items() if k != "args"},
        "approval_required": risk.get("approval") in ("required", "two_person")}}
    if plan.decision.verdict == "allow" and risk.get("untrusted_output") and not state.tainted:
        # Decided as if it already returned: later calls of the batch see the taint (stricter, never looser).
        state.tainted, state.taint_source = True, f"{plan.skill.name} returned untrusted content ({plan.call_id})"


def _deny(plan: Planned) -> None:
    decision = plan.decision
    error = NotPermitted(decision.reason, code="denied_by_policy", rule_id=decision.rule_id,
                         policy_version=decision.policy_version or None)
    plan.tool_call.status, plan.tool_call.error_class = CallStatus.DENIED, error.error_class
    plan.result = error_result(plan.call_id, error)


def _confirm(plan: Planned, state: BatchState) -> None:
    from approvals.services import open_approval_request

    call = plan.tool_call
    call.status = CallStatus.AWAITING_APPROVAL
    call.sealed_arguments = seal(plan.arguments)
    try:
        _open_approval(plan, call, state, open_approval_request)
    except Exception:
        call.pk, call._state.adding, call.sealed_arguments = None, True, ""  # rolled back: record it as failed
        raise


def _open_approval(plan: Planned, call: ToolCall, state: BatchState, open_approval_request: Any) -> None:
    with transaction.atomic():
        call.save()
        if plan.idempotency_key:
            IdempotencyRecord.objects.create(tenant_id=state.run.tenant_id, key=plan.idempotency_key,
                                             arguments_sha256=call.arguments_sha256, skill_name=call.name, call=call)
        approval = open_approval_request(call=call, decision=call.decision)
        stored = {
            "call_id": plan.call_id, "status": "approval_required", "is_error": False, "approval_id": approval.pk,
            "proposed_action": {"skill": plan.skill.name, "version": plan.skill.version, "effect": plan.effect,
                                "data_classification": plan.skill.data_classification, "arguments": call.arguments},
            "reason": plan.decision.floor or plan.decision.reason, "expires_at": approval.expires_at.isoformat(),
        }
        call.result = stored  # kept with the redacted arguments; the agent gets back exactly what it proposed
        call.save(update_fields=["result"])
        plan.result = {**stored, "proposed_action": {**stored["proposed_action"], "arguments": plan.arguments}}


def _claim_key(plan: Planned, state: BatchState) -> None:
    """Mutating calls claim their key before running; a concurrent twin gets `in_progress`."""
    call = plan.tool_call
    call.status, call.started_at = CallStatus.EXECUTING, timezone.now()
    with transaction.atomic():
        call.save()
        if plan.idempotency_key:
            try:
                with transaction.atomic():
                    plan.idempotency_record = IdempotencyRecord.objects.create(
                        tenant_id=state.run.tenant_id, key=plan.idempotency_key,
                        arguments_sha256=call.arguments_sha256, skill_name=call.name, call=call)
            except IntegrityError:
                raise Transient("An earlier call with this idempotency key is still running.", code="in_progress",
                                retry_after=1) from None


# Execution phase -----------------------------------------------------------------------------------

def invocation_context(run: Run, call: ToolCall) -> InvocationContext:
    return InvocationContext(run_id=str(run.pk), call_id=call.call_id, tenant=run.tenant.slug,
                             agent_role=run.agent.role, end_user=run.end_user,
                             idempotency_key=call.idempotency_key)


def _execute_allowed(allowed: list[Planned], state: BatchState) -> None:
    run = state.run
    from runs import client_exec

    for plan in [p for p in allowed if client_exec.is_client_skill(p.skill.manifest)]:
        allowed.remove(plan)  # the agent's SDK runs it and posts the result (runs/client_exec.py)
        plan.tool_call.save()
        plan.result = client_exec.issue_client_token(call=plan.tool_call)
    reads = [plan for plan in allowed if plan.effect in execution.READ_EFFECTS]
    others = [plan for plan in allowed if plan.effect not in execution.READ_EFFECTS]
    outcomes = execution.execute_concurrently([
        (plan.skill.manifest, plan.effect, plan.arguments, invocation_context(run, plan.tool_call)) for plan in reads
    ])
    for plan, outcome in zip(reads, outcomes, strict=True):
        plan.outcome = outcome
    for plan in others:  # side effects: one at a time, in the order given
        try:
            _claim_key(plan, state)
        except CallError as exc:
            plan.tool_call.status, plan.tool_call.error_class = CallStatus.FAILED, exc.error_class
            plan.result = error_result(plan.call_id, exc)
            continue
        plan.outcome = execution.execute(manifest=plan.skill.manifest, effect=plan.effect, arguments=plan.arguments,
                                         context=invocation_context(run, plan.tool_call))
    for plan in allowed:
        if plan.outcome is not None:
            plan.result = recording.apply_outcome(call=plan.tool_call, skill=plan.skill, outcome=plan.outcome,
                                                  warnings=plan.warnings)
            if plan.outcome.ok and plan.skill.manifest.get("risk", {}).get("untrusted_output") and not run.tainted:
                run.tainted, run.taint_source = True, f"{plan.skill.name} returned untrusted content ({plan.call_id})"


def process_batch(*, run: Run, calls: list[dict]) -> list[dict]:
    """One result per call, in call order. See the module docstring for the order of checks."""
    plans = [Planned(position=position, raw=raw) for position, raw in enumerate(calls)]
    try:
        state = _load_state(run, calls)
    except Exception:
        logger.exception("Gate could not load its state for run %s", run.pk)
        return [error_result(p.raw.get("call_id", "") if isinstance(p.raw, dict) else "", Internal(GENERIC_INTERNAL))
                for p in plans]
    allowed: list[Planned] = []
    for plan in plans:
        try:
            _decide(plan, state)
            if plan.result is not None:
                continue
            if plan.decision.verdict == "deny":
                _deny(plan)
            elif plan.decision.verdict == "confirm":
                _confirm(plan, state)
            else:
                allowed.append(plan)
        except CallError as exc:
            plan.result = error_result(plan.call_id, exc)
            _mark_failed(plan, state, exc)
        except Exception:
            logger.exception("Gate failed on run %s call %r; failing closed", run.pk, plan.call_id)
            plan.result = error_result(plan.call_id, Internal(GENERIC_INTERNAL))
            _mark_failed(plan, state, Internal(GENERIC_INTERNAL))
    if state.tainted and not run.tainted:
        run.tainted, run.taint_source = True, state.taint_source
    _execute_allowed(allowed, state)
    recording.record_batch(run=run, plans=plans)
    return [plan.result for plan in plans]


def _mark_failed(plan: Planned, state: BatchState, error: CallError) -> None:
    if plan.tool_call is not None and plan.tool_call.pk is not None:
        return  # already saved (awaiting approval or executing); leave its recorded state
    if not plan.call_id or plan.call_id in state.existing or plan.call_id_reused:
        plan.tool_call = None  # nothing to record under a malformed or reused call_id
        return
    plan.tool_call = plan.tool_call or _new_tool_call(plan, state, sha256_of(plan.arguments))
    plan.tool_call.status = CallStatus.INVALID if error.error_class in ("validation", "not_found") else (
        CallStatus.DENIED if error.error_class == "authorization" else CallStatus.FAILED)
    plan.tool_call.error_class = error.error_class


__all__ = ["MAX_BATCH", "error_result", "invocation_context", "process_batch"]
