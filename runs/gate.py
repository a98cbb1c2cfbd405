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

from airlock_sdk.policy import kernel
from airlock_sdk.policy.context import approval_required
from airlock_sdk.policy.kernel import Path
from django.db import IntegrityError, transaction
from django.utils import timezone

from lib.canonical import sha256_of
from lib.sealing import seal
from policies.engine import Decision
from policies.services import ActivePolicies
from registry.models import MUTATING_EFFECTS, VersionStatus
from registry.snapshots import ResolvedSkill, SnapshotIndex, index_for
from registry.stages import Audience
from runs import (
    authorization,
    batch_input,
    builtin_tools,
    client_exec,
    context_budget,
    execution,
    gate_cache,
    hooks,
    lifecycle,
    meta_tools,
    pagination,
    presenting,
    ratelimit,
    recording,
    tool_list,
)
from runs.adapters import InvocationContext
from runs.errors import GENERIC_INTERNAL, CallError, Internal, NotPermitted, Transient, ValidationFailed
from runs.models import CallStatus, IdempotencyRecord, Run, ToolCall
from traces.redaction import redact, redact_text

logger = logging.getLogger(__name__)
MAX_BATCH = 50
EXPOSED_BY_AGENT = "agent"  # the framework reported what it showed the model
EXPOSED_BY_GATE = "gate"  # not reported: the callable set at the time, as the gate knew it


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
    presentation: presenting.Presentation | None = None  # the view and page it asked for

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
    generation: gate_cache.Generation = None
    path: Path = Path.REST_GATE
    seen: set[str] = field(default_factory=set)
    exposed_tools: dict = field(default_factory=dict)  # recorded with every call of the batch


def error_result(call_id: str, error: CallError) -> dict:
    call_id = redact_text(call_id) if isinstance(call_id, str) else call_id
    return {"call_id": call_id, "status": "error", "is_error": True, "error": error.as_error()}


# Decision phase ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preloaded:
    """What the request's own run query already read (runs/api/batch_auth.py), so the gate need not."""

    generation: gate_cache.Generation
    prior_calls: bool  # a call_id of the batch was used before in this run
    prior_keys: bool  # an idempotency key of the batch is recorded in the tenant


def replay_lookups(run_id, calls: list) -> tuple[list[str], set[str]]:
    """The call ids and idempotency keys under which earlier outcomes of these calls would be recorded."""
    calls = [raw for raw in calls if batch_input.is_well_formed(raw)]
    call_ids = [redact_text(raw["call_id"]) for raw in calls if isinstance(raw.get("call_id"), str)]
    keys = {_explicit_key(raw) for raw in calls} | {f"{run_id}:{c}" for c in call_ids}
    return call_ids, keys - {""}


def _load_state(run: Run, calls: list[dict], preloaded: Preloaded | None) -> BatchState:
    calls = [raw for raw in calls if batch_input.is_well_formed(raw)]  # the others fail alone, in _check_shape
    generation = preloaded.generation if preloaded else None
    index = index_for(run.snapshot)
    audience = Audience.of_run(run)
    resolved_ids = set()
    for raw in calls:
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            version = raw.get("version")
            skill = index.resolve(
                raw["name"], version if isinstance(version, str) and version else None, audience=audience
            )
            if skill is not None:
                resolved_ids.add(skill.skill_version_id)
    call_ids, keys = replay_lookups(run.pk, calls)
    existing, records = {}, {}
    if call_ids and (preloaded is None or preloaded.prior_calls):
        existing = {call.call_id: call for call in ToolCall.objects.filter(run=run, call_id__in=call_ids)}
    if keys and (preloaded is None or preloaded.prior_keys):
        records = {
            record.key: record
            for record in IdempotencyRecord.objects.filter(tenant_id=run.tenant_id, key__in=keys).select_related("call")
        }
    return BatchState(
        run=run,
        index=index,
        live_status=gate_cache.version_statuses(resolved_ids, generation=generation) if resolved_ids else {},
        grants=gate_cache.active_grants(tenant_id=run.tenant_id, agent_role=run.agent.role, generation=generation),
        policies=gate_cache.active_policies(generation=generation),
        existing=existing,
        records=records,
        tainted=run.tainted,
        taint_source=run.taint_source,
        generation=generation,
    )


def _explicit_key(raw: dict) -> str:
    key = raw.get("idempotency_key")
    return redact_text(key.strip())[:300] if isinstance(key, str) else ""


def _exposure(state: BatchState, reported: list[str] | None, generation: gate_cache.Generation) -> dict:
    """The tools the model was shown this turn, as its framework reported them; otherwise what the
    gate knew the agent could call then (cached: it would be worked out again on every batch). A reported
    name is free text from the agent, stored with every call: one that looks like a secret is kept masked."""
    if reported is not None:
        return {"names": [redact_text(name) for name in reported], "source": EXPOSED_BY_AGENT}
    run = state.run
    key = (run.snapshot_id, run.tenant_id, run.agent.role, tuple(pattern for pattern, _ in state.grants))
    names = gate_cache.callable_names(key=key, generation=generation, load=lambda: _available(state))
    return {"names": list(names), "source": EXPOSED_BY_GATE}


def _recorded(state: BatchState) -> dict:
    """What every call of the batch keeps of the moment it was proposed, for its "why" panel."""
    return {
        "exposed_tools": state.exposed_tools,
        "taint": {"tainted": state.tainted, "source": state.taint_source},
    }


def _check_shape(plan: Planned, state: BatchState) -> None:
    raw = plan.raw
    batch_input.check_call(raw)
    call_id = raw.get("call_id")
    if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > 200:
        raise ValidationFailed(
            "call_id must be a non-empty string (at most 200 characters).",
            code="malformed_call",
            fields=[{"field": "call_id", "message": "required string"}],
        )
    # A call id that looks like a secret is kept (and answered) masked; the mask is deterministic, so a
    # retry of the same call still finds it.
    call_id = plan.call_id = redact_text(call_id)
    if call_id in state.seen:  # taken once read, even by a call the checks below refuse
        plan.call_id_reused = True
        raise ValidationFailed(f"call_id {call_id} appears twice in this batch.", code="duplicate_call_id")
    state.seen.add(call_id)
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ValidationFailed(
            "name must be the skill's name.",
            code="malformed_call",
            fields=[{"field": "name", "message": "required string"}],
        )
    if "version" in raw and raw["version"] is not None and not isinstance(raw["version"], str):
        raise ValidationFailed(
            "version must be a string such as 1.2.0.",
            code="malformed_call",
            fields=[{"field": "version", "message": "string"}],
        )
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ValidationFailed(
            "arguments must be an object.", code="malformed_call", fields=[{"field": "arguments", "message": "object"}]
        )
    plan.arguments = arguments


def _available(state: BatchState) -> list[str]:
    """What this agent may call: the run's tool list (runs/tool_list.py), as /api/v1/tools?run_id= shows it."""
    return tool_list.callable_names(state.run, index=state.index, grants=state.grants, generation=state.generation)


def _resolve(plan: Planned, state: BatchState) -> None:
    name, version = plan.raw["name"], plan.raw.get("version") or None
    plan.skill = builtin_tools.resolve(name, version, run=state.run, index=state.index)
    live = state.live_status.get(plan.skill.skill_version_id) if plan.skill else None
    if plan.skill is not None and (plan.skill.deprecated or live == VersionStatus.DEPRECATED):
        replacement = f"; use {plan.skill.replacement_name} instead" if plan.skill.replacement_name else ""
        plan.warnings.append(f"{name} {plan.skill.version} is deprecated{replacement}.")


def _ruling(plan: Planned, state: BatchState) -> kernel.Ruling:
    """The kernel's ruling on the call, with the facts this batch loaded (runs/authorization.py). A call that
    gives back an earlier result (a page, describe_result) is judged as a call of the skill that produced it."""
    run = state.run
    judged = _judged_as(plan, state)
    if judged is None:
        skill, arguments, covered = plan.skill, plan.arguments, _coverage(plan, state)
        standing = kernel.CALLABLE
        if skill is not None:
            standing = authorization.standing_of(skill, status=state.live_status.get(skill.skill_version_id))
        errors = authorization.errors_in(skill, arguments) if skill is not None else None
    else:
        (skill, arguments, covered), errors = judged, []
        standing = authorization.standing_of(skill, generation=state.generation)
    facts = kernel.Facts(
        path=state.path,
        agent=authorization.agent_facts(run.agent),
        tenant=authorization.tenant_facts(run.tenant),
        run=authorization.run_state(run, tainted=state.tainted, taint_source=state.taint_source),
        name=plan.raw["name"],
        version=plan.raw.get("version") or None,
        skill=authorization.skill_facts(skill, standing=standing),
        arguments=arguments,
        argument_errors=errors,
        grants=state.grants,
        policies=authorization.evaluator(state.policies, tenant_id=run.tenant_id),
        rate_meter=lambda passed: _rate_refusal(plan, state, passed),
        covered_by=covered,
    )
    return kernel.decide(facts)


def _judged_as(plan: Planned, state: BatchState) -> tuple[ResolvedSkill, dict, kernel.CoveredBy] | None:
    """describe_result with valid arguments gives back a result of this run in full: it is judged as the call
    that produced it (that skill, its recorded arguments, covered by its approval if a person gave one)."""
    if plan.skill is None or plan.skill.name != builtin_tools.DESCRIBE_RESULT:
        return None
    if authorization.errors_in(plan.skill, plan.arguments):
        return None  # the kernel refuses its own arguments first
    call = context_budget.described_call(plan.arguments.get("ref"), run=state.run)
    producer = authorization.recorded_skill(call) if call is not None else None
    if producer is None:
        return None  # an unknown ref: describe_result itself answers that there is no such result
    return producer, call.arguments or {}, _covered_by(call)


def _covered_by(producer: ToolCall | None) -> kernel.CoveredBy:
    """What an earlier call's approval covers: the rule a person approved it under (a confirm verdict that
    produced a result was approved), nothing when it was simply allowed."""
    if producer is None or producer.verdict != "confirm":
        return kernel.CoveredBy()
    return kernel.CoveredBy(approved_rule=kernel.approved_rule(producer.decision or {}))


def _rate_refusal(plan: Planned, state: BatchState, passed: bool) -> kernel.Refusal | None:
    """Count the call (a refused one against the agent only); the limit's refusal when over it."""
    run = state.run
    try:
        if passed:
            ratelimit.check_call(
                run.agent_id, plan.skill.name, plan.skill.manifest, tenant_id=run.tenant_id, tenant_slug=run.tenant.slug
            )
        else:
            ratelimit.check_agent(run.agent_id)
    except CallError as exc:
        return kernel.Refusal(exc.error_class, exc.code, exc.message, dict(exc.extra))
    return None


def _coverage(plan: Planned, state: BatchState) -> kernel.CoveredBy | None:
    """A page of a kept result reads what its producing call returned: covered by that call's approval."""
    if plan.presentation is None or not plan.presentation.from_store:
        return None
    return _covered_by(pagination.producing_call(plan.presentation.page, run_id=str(state.run.pk)))


def _refused(state: BatchState, refusal: kernel.Refusal) -> CallError:
    error = authorization.call_error(refusal)
    if refusal.code in ("unknown_skill", "retired") or refusal.extra.get("no_grant"):
        error.extra["available"] = _available(state)  # listing what it may call helps the agent
    if refusal.code == "unknown_skill":
        error.message += " Call one of the skills listed in 'available'."
    return error


def _replay(plan: Planned, previous: ToolCall) -> dict:
    if previous.result is None and lifecycle.lease_expired(previous):
        # The process executing it died (nothing holds an executing call past its lease): the outcome is
        # unknown and goes to reconciliation now, instead of `in_progress` until the beat's sweep.
        recording.settle_abandoned(previous)
    if previous.result is None:
        raise Transient(
            "An earlier call with this idempotency key is still running.", code="in_progress", retry_after=1
        )
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
            raise ValidationFailed(
                f"call_id {plan.call_id} was already used in this run with other arguments.", code="duplicate_call_id"
            )
        return _replay(plan, previous)
    key = _explicit_key(plan.raw)
    if not key and plan.effect in MUTATING_EFFECTS:
        key = f"{state.run.pk}:{plan.call_id}"
    plan.idempotency_key = key
    record = state.records.get(key) if key else None
    if record is None:
        return None
    if record.arguments_sha256 != sha or record.skill_name != plan.skill.name:
        raise ValidationFailed(
            "This idempotency key was used before with other arguments; use a new key for a new action.",
            code="idempotency_key_reused",
        )
    if record.outcome is not None:
        plan.warnings.append("Replayed the recorded outcome for this idempotency key; nothing ran again.")
        return {**record.outcome, "call_id": plan.call_id}
    if record.call is not None:
        return _replay(plan, record.call)
    raise Transient("An earlier call with this idempotency key is still running.", code="in_progress", retry_after=1)


def _new_tool_call(plan: Planned, state: BatchState, sha: str) -> ToolCall:
    skill = plan.skill
    return ToolCall(
        run=state.run,
        call_id=plan.call_id or f"#{plan.position}",
        position=plan.position,
        name=str(plan.raw.get("name", ""))[:200] if isinstance(plan.raw, dict) else "",
        requested_version=str(plan.raw.get("version") or "")[:64] if isinstance(plan.raw, dict) else "",
        skill_version_id=skill.skill_version_id if skill else None,
        effect=plan.effect,
        arguments=redact(
            plan.arguments,
            schema=skill.manifest.get("input_schema") if skill else None,
            data_classification=skill.data_classification if skill else "internal",
        ),
        arguments_sha256=sha,
        idempotency_key=plan.idempotency_key,
        warnings=plan.warnings,
        decision={**_recorded(state), **_asked(plan)},
    )


def _asked(plan: Planned) -> dict:
    """The view and page a call asked for, kept with it: its result is presented from them (an approved
    call's too, when a worker executes it later)."""
    shown = plan.presentation
    return {"presentation": shown.recorded()} if shown is not None and (shown.view or shown.page) else {}


def _read_call(plan: Planned, state: BatchState) -> None:
    """The call's shape, taint mark, skill and presentation; a malformed call still counts against the limit."""
    try:
        _check_shape(plan, state)
        taint = plan.raw.get("taint")
        if taint and not state.tainted:
            state.tainted = True
            state.taint_source = redact_text(
                taint if isinstance(taint, str) else f"agent marked call {plan.call_id}", limit=300
            )
        _resolve(plan, state)
        if plan.skill is not None:
            plan.presentation, plan.arguments = presenting.requested(
                plan.raw, plan.arguments, skill=plan.skill, run_id=str(state.run.pk)
            )
    except CallError:
        ratelimit.check_agent(state.run.agent_id)  # over the limit, that is the answer
        raise


def _decide(plan: Planned, state: BatchState) -> None:
    _read_call(plan, state)
    ruling = _ruling(plan, state)
    if ruling.refused:
        raise _refused(state, ruling.refusal)
    sha = sha256_of(plan.arguments)
    replay = _check_idempotency(plan, state, sha)
    plan.tool_call = _new_tool_call(plan, state, sha)
    if replay is not None:
        plan.result = replay
        if plan.call_id in state.existing:  # the same call posted again: nothing new to record
            plan.tool_call = None
            return
        lifecycle.first_status(
            plan.tool_call, CallStatus.SUCCEEDED if replay.get("status") == "ok" else CallStatus.FAILED
        )
        plan.tool_call.decision = {**plan.tool_call.decision, "replay": True}
        return
    plan.decision = ruling.decision
    plan.decision.verdict = ruling.verdict  # a page's confirm the producing call's approval covers is allow
    plan.tool_call.verdict = ruling.verdict
    plan.tool_call.decision = {
        **plan.tool_call.decision,
        **plan.decision.as_dict(),
        **({"covered_by_approval": True} if ruling.covered else {}),
        "inputs": {
            "context": {k: v for k, v in ruling.context.items() if k != "args"},
            "approval_required": approval_required(plan.skill.manifest),
        },
    }
    if plan.decision.verdict == "allow" and _untrusted_output(plan.skill) and not state.tainted:
        # Decided as if it already returned: later calls of the batch see the taint (stricter, never looser).
        state.tainted, state.taint_source = True, f"{plan.skill.name} returned untrusted content ({plan.call_id})"


def _untrusted_output(skill: ResolvedSkill) -> bool:
    return bool((skill.manifest.get("risk") or {}).get("untrusted_output"))


def _needs_the_skill_itself(plan: Planned) -> NotPermitted:
    """A built-in tool is answered inline and never waits for a person: when a rule asks for one (on the skill
    whose result describe_result gives back), the agent calls that skill again, which asks."""
    return NotPermitted(
        f"A person must confirm this now ({plan.decision.reason}); call the skill that produced it again to ask.",
        code="confirm_the_skill_itself",
        rule_id=plan.decision.rule_id,
    )


def _deny(plan: Planned) -> None:
    decision = plan.decision
    error = NotPermitted(
        decision.reason,
        code="denied_by_policy",
        rule_id=decision.rule_id,
        policy_version=decision.policy_version or None,
    )
    lifecycle.first_status(plan.tool_call, CallStatus.DENIED)
    plan.tool_call.error_class = error.error_class
    plan.result = error_result(plan.call_id, error)


def _confirm(plan: Planned, state: BatchState) -> None:
    call = plan.tool_call
    lifecycle.first_status(call, CallStatus.AWAITING_APPROVAL)
    call.sealed_arguments = seal(plan.arguments)
    try:
        _open_approval(plan, call, state)
    except Exception:
        call.pk, call._state.adding, call.sealed_arguments = None, True, ""  # rolled back: record it as failed
        raise


def _open_approval(plan: Planned, call: ToolCall, state: BatchState) -> None:
    with transaction.atomic():
        call.save()
        if plan.idempotency_key:
            IdempotencyRecord.objects.create(
                tenant_id=state.run.tenant_id,
                key=plan.idempotency_key,
                arguments_sha256=call.arguments_sha256,
                skill_name=call.name,
                call=call,
            )
        approval = hooks.open_approval(call=call, decision=call.decision)
        stored = {
            "call_id": plan.call_id,
            "status": "approval_required",
            "is_error": False,
            "approval_id": approval.pk,
            "proposed_action": {
                "skill": plan.skill.name,
                "version": plan.skill.version,
                "effect": plan.effect,
                "data_classification": plan.skill.data_classification,
                "arguments": call.arguments,
            },
            "reason": plan.decision.floor or plan.decision.reason,
            "expires_at": approval.expires_at.isoformat(),
        }
        call.result = stored  # kept with the redacted arguments; the agent gets back exactly what it proposed
        call.save(update_fields=["result"])
        plan.result = {**stored, "proposed_action": {**stored["proposed_action"], "arguments": plan.arguments}}


def _claim_key(plan: Planned, state: BatchState) -> None:
    """A side effect is recorded as `executing` (committed, with its lease) before it runs; a concurrent twin
    with the same idempotency key gets `in_progress`."""
    call = plan.tool_call
    lifecycle.start_executing(call, timeout_s=client_exec.lease_seconds(plan.skill.manifest))
    call.warnings = plan.warnings
    try:
        with transaction.atomic():
            call.save()
            if plan.idempotency_key:
                plan.idempotency_record = IdempotencyRecord.objects.create(
                    tenant_id=state.run.tenant_id,
                    key=plan.idempotency_key,
                    arguments_sha256=call.arguments_sha256,
                    skill_name=call.name,
                    call=call,
                )
    except IntegrityError:
        call.pk, call._state.adding = None, True  # both rows were rolled back
        raise Transient(
            "An earlier call with this idempotency key is still running.", code="in_progress", retry_after=1
        ) from None


# Execution phase -----------------------------------------------------------------------------------


def invocation_context(run: Run, call: ToolCall) -> InvocationContext:
    return InvocationContext(
        run_id=str(run.pk),
        call_id=call.call_id,
        tenant=run.tenant.slug,
        agent_role=run.agent.role,
        end_user=run.end_user,
        idempotency_key=call.idempotency_key,
    )


def _execute_allowed(allowed: list[Planned], state: BatchState) -> None:
    run = state.run
    for plan in [p for p in allowed if p.presentation is not None and p.presentation.from_store]:
        allowed.remove(plan)  # a page of a kept result: read from the record, the tool never runs again
        _settle_read(plan, stored_page_outcome(plan.presentation.page, run_id=str(run.pk)), run)
    for plan in [p for p in allowed if client_exec.is_client_skill(p.skill.manifest)]:
        allowed.remove(plan)  # the agent's SDK runs it and posts the result (runs/client_exec.py)
        _guarded(plan, state, lambda p=plan: _issue_client_token(p))
    for plan in [p for p in allowed if builtin_tools.answered_inline(p.skill.name)]:
        allowed.remove(plan)  # answered here, from what this batch already loaded
        outcome = meta_tools.execute_inline(
            plan.skill.name,
            plan.arguments,
            run=run,
            index=state.index,
            grants=state.grants,
            generation=state.generation,
        )
        _settle_read(plan, outcome, run)
    reads = [plan for plan in allowed if plan.effect in execution.READ_EFFECTS]
    others = [plan for plan in allowed if plan.effect not in execution.READ_EFFECTS]
    # Reads were authorized a moment ago, in this request, from live rows; they change nothing.
    outcomes = execution.execute_concurrently(
        [(plan.skill.manifest, plan.effect, plan.arguments, invocation_context(run, plan.tool_call)) for plan in reads]
    )
    for plan, outcome in zip(reads, outcomes, strict=True):
        _offer_fallback(plan, outcome, state)
        _settle_read(plan, outcome, run)
    for plan in others:  # side effects: one at a time, in the order given, each recorded before the next
        _guarded(plan, state, lambda p=plan: _execute_write(p, state))


def stored_page_outcome(page: pagination.PageRequest, *, run_id: str) -> execution.Outcome:
    """A page of a kept result as an outcome: read from the record, the tool does not run."""
    outcome = execution.Outcome(started_at=timezone.now())
    try:
        outcome.content, outcome.provenance = pagination.stored_content(page, run_id=run_id)
    except CallError as exc:
        outcome.error = exc
    outcome.finished_at = timezone.now()
    return outcome


def _settle_read(plan: Planned, outcome: execution.Outcome, run: Run) -> None:
    plan.outcome = outcome
    plan.result = recording.apply_outcome(
        call=plan.tool_call, skill=plan.skill, outcome=outcome, warnings=plan.warnings, arguments=plan.arguments
    )
    lifecycle.first_status(plan.tool_call, recording.outcome_status(outcome))
    _note_untrusted(plan, run)


def _guarded(plan: Planned, state: BatchState, act) -> None:
    """Claim the call (committed as executing), check it live, then act; a failure leaves a recorded outcome."""
    try:
        _claim_key(plan, state)
    except CallError as exc:
        lifecycle.first_status(plan.tool_call, CallStatus.FAILED)
        plan.tool_call.error_class = exc.error_class
        plan.result = error_result(plan.call_id, exc)
        return
    try:
        refusal = authorization.live_refusal(
            path=state.path,
            run=state.run,
            skill=plan.skill,
            arguments=plan.arguments,
            approved_verdict=plan.decision.verdict,
        )
        if refusal is not None:
            plan.result = recording.refuse_claimed(
                call=plan.tool_call, error=refusal, key_record=plan.idempotency_record
            )
            return
        act()
    except Exception:
        logger.exception("Gate failed executing run %s call %s", state.run.pk, plan.call_id)
        plan.result = recording.settle_after_failure(
            call=plan.tool_call, key_record=plan.idempotency_record, executed=plan.outcome is not None
        )


def _issue_client_token(plan: Planned) -> None:
    plan.result = client_exec.issue_client_token(call=plan.tool_call, arguments=plan.arguments)


def _execute_write(plan: Planned, state: BatchState) -> None:
    plan.outcome = execution.execute(
        manifest=plan.skill.manifest,
        effect=plan.effect,
        arguments=plan.arguments,
        context=invocation_context(state.run, plan.tool_call),
    )
    _offer_fallback(plan, plan.outcome, state)
    plan.result = recording.record_execution(
        call=plan.tool_call,
        skill=plan.skill,
        outcome=plan.outcome,
        warnings=plan.warnings,
        key_record=plan.idempotency_record,
        arguments=plan.arguments,
    )
    _note_untrusted(plan, state.run)


def _offer_fallback(plan: Planned, outcome: execution.Outcome, state: BatchState) -> None:
    """While a skill's breaker is open, its error names the fallback its owners approved (`execution.fallback`),
    if this agent may call that skill now; the offer is recorded with the call and on its span."""
    fallback = (plan.skill.manifest.get("execution") or {}).get("fallback")
    error = outcome.error
    if not fallback or error is None or error.code not in execution.BREAKER_OPEN_CODES:
        return
    if fallback not in _available(state):
        return
    error.extra["fallback"] = fallback
    error.message += f" Its owners name {fallback} as the fallback while it is unavailable: call that instead."
    plan.tool_call.decision = {**plan.tool_call.decision, "fallback_offered": fallback}


def _note_untrusted(plan: Planned, run: Run) -> None:
    if plan.outcome.ok and _untrusted_output(plan.skill) and not run.tainted:
        run.tainted, run.taint_source = True, f"{plan.skill.name} returned untrusted content ({plan.call_id})"


def process_batch(
    *,
    run: Run,
    calls: list[dict],
    preloaded: Preloaded | None = None,
    exposed_tools: list[str] | None = None,
    path: Path = Path.REST_GATE,
) -> list[dict]:
    """One result per call, in call order. See the module docstring for the order of checks.
    `exposed_tools`: the tool names the agent's framework showed the model this turn, if it says.
    `path`: which of the kernel's paths asks (the REST API, the MCP gateway or a pipeline step)."""
    plans = [Planned(position=position, raw=raw) for position, raw in enumerate(calls)]
    tainted_before = run.tainted
    try:
        state = _load_state(run, calls, preloaded)
        state.path = path
        state.exposed_tools = _exposure(state, exposed_tools, preloaded.generation if preloaded else None)
    except Exception:
        logger.exception("Gate could not load its state for run %s", run.pk)
        return [
            error_result(p.raw.get("call_id", "") if isinstance(p.raw, dict) else "", Internal(GENERIC_INTERNAL))
            for p in plans
        ]
    closed = authorization.run_refusal(run)  # the kernel's first step, once for the whole batch
    allowed: list[Planned] = []
    for plan in plans:
        if closed is not None:
            plan.result = error_result(plan.raw.get("call_id", "") if isinstance(plan.raw, dict) else "", closed)
            continue
        try:
            _decide(plan, state)
            if plan.result is not None:
                continue
            if plan.decision.verdict == "deny":
                _deny(plan)
            elif (
                plan.decision.verdict == "confirm"
                and plan.skill.builtin
                and not builtin_tools.asks_a_person(plan.skill.name)
            ):
                raise _needs_the_skill_itself(plan)
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
    recording.record_batch(run=run, plans=plans, tainted_before=tainted_before)
    return [plan.result for plan in plans]


def _mark_failed(plan: Planned, state: BatchState, error: CallError) -> None:
    if plan.tool_call is not None and plan.tool_call.pk is not None:
        return  # already saved (awaiting approval or executing); leave its recorded state
    if not plan.call_id or plan.call_id in state.existing or plan.call_id_reused:
        plan.tool_call = None  # nothing to record under a malformed or reused call_id
        return
    plan.tool_call = plan.tool_call or _new_tool_call(plan, state, sha256_of(plan.arguments))
    plan.tool_call.decision = {**plan.tool_call.decision, "error": error.as_error()}
    lifecycle.first_status(
        plan.tool_call,
        CallStatus.INVALID
        if error.error_class in ("validation", "not_found")
        else CallStatus.DENIED
        if error.error_class == "authorization"
        else CallStatus.FAILED,
    )
    plan.tool_call.error_class = error.error_class


__all__ = [
    "MAX_BATCH",
    "Preloaded",
    "error_result",
    "invocation_context",
    "process_batch",
    "replay_lookups",
    "stored_page_outcome",
]
