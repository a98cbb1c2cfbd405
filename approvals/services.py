"""Use cases of approvals: open a request, decide it, expire it, resume the paused call."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from approvals import broadcast, lifecycle, notifications, questions, routing_rules, tasks
from approvals.call_arguments import raw_arguments
from approvals.masking import diff, mask, unmask
from approvals.models import (
    NEGATIVE_STATUSES,
    ApprovalEvent,
    ApprovalMode,
    ApprovalRequest,
    ApprovalStatus,
    ApprovalVote,
)
from console.models import Role
from console.tenancy import require_role
from lib import clock
from lib.canonical import sha256_of
from lib.public_url import public_reverse
from lib.schema_patterns import SchemaValidator, UnsupportedPattern
from lib.sealing import seal, unseal
from runs import approval_outcomes
from runs.authorization import decision_on
from runs.events import append_event
from traces.recording import record_span_safely
from traces.redaction import redact, redact_text

logger = logging.getLogger(__name__)

RECENT_STEPS = 5
ORPHAN_AFTER = timedelta(minutes=5)
# A scheduled call's delayed task should start it on time; past this, the beat sweep enqueues it again.
SCHEDULE_SLACK = timedelta(seconds=30)


@dataclass
class Actor:
    """Who made a change: a person (user) or the system (expiry, resume task)."""

    label: str
    user: Any = None

    @classmethod
    def of(cls, user) -> Actor:
        return cls(label=user.get_username(), user=user)


SYSTEM = Actor(label="system")


def _record(
    request: ApprovalRequest,
    *,
    actor: Actor,
    action: str,
    from_status: str = "",
    to_status: str = "",
    detail: dict | None = None,
) -> ApprovalEvent:
    # The kept fields let the row outlive the request and the run (approvals.retention).
    run_id = request.context.get("run_id") or request.call.run_id
    return ApprovalEvent.objects.create(
        request=request,
        actor=actor.user,
        actor_label=actor.label,
        action=action,
        from_status=from_status,
        to_status=to_status,
        detail=redact(detail or {}),
        tenant_id=request.tenant_id,
        approval_ref=request.pk,
        run_ref=run_id,
        call_ref=request.context.get("call_id") or request.call.call_id,
        skill_name=request.skill_name,
        skill_version=request.skill_version,
    )


def _record_span(**kwargs: Any) -> None:
    record_span_safely(what="an approval span", **kwargs)


def _manifest_of(call) -> dict:
    skill_version = getattr(call, "skill_version", None)
    return (skill_version.manifest if skill_version is not None else None) or {}


def approval_ttl(*, manifest: dict, tenant) -> timedelta:
    """The tenant's approval TTL, unless the skill's manifest sets `risk.approval_ttl_seconds`."""
    risk = manifest.get("risk") or {}
    seconds = risk.get("approval_ttl_seconds")
    if isinstance(seconds, int) and seconds > 0:
        return timedelta(seconds=seconds)
    return tenant.approval_ttl


def undo_delay(manifest: dict) -> int:
    """The skill's undo window in seconds (`risk.delay_seconds`): an approved call waits this long, cancellable."""
    seconds = (manifest.get("risk") or {}).get("delay_seconds")
    return seconds if isinstance(seconds, int) and seconds > 0 else 0


def _recent_steps(call) -> list[dict]:
    earlier = (
        type(call).objects.filter(run=call.run).exclude(pk=call.pk).order_by("-created_at", "-position")[:RECENT_STEPS]
    )
    return [
        {"call_id": c.call_id, "name": c.name, "status": c.status, "verdict": c.verdict, "at": c.created_at.isoformat()}
        for c in reversed(list(earlier))
    ]


def _taint_source(decision: dict, run) -> str:
    for key in ("taint_source", "taint"):
        value = decision.get(key)
        if isinstance(value, str) and value:
            return value
    # The gate records the run's taint as the policy saw it (a batch can taint a run mid-way).
    seen = ((decision.get("inputs") or {}).get("context") or {}).get("run") or {}
    if seen.get("tainted") and seen.get("taint_source"):
        return str(seen["taint_source"])
    return run.taint_source if run.tainted else ""


def open_approval_request(*, call, decision: dict) -> ApprovalRequest:
    """Create the approval request for a `confirm` verdict on `call` (idempotent per call).

    The request is bound to the hash of the exact raw arguments and to the policy version that
    asked for it; approvers are notified after the caller's transaction commits.
    """
    existing = ApprovalRequest.objects.filter(call=call).first()
    if existing is not None:
        return existing
    run = call.run
    manifest = _manifest_of(call)
    risk = manifest.get("risk") or {}
    mode = ApprovalMode.TWO_PERSON if risk.get("approval") == ApprovalMode.TWO_PERSON else ApprovalMode.REQUIRED
    skill_version = call.skill_version.version if call.skill_version_id else call.requested_version
    effect = call.effect or risk.get("effect", "")
    now = timezone.now()
    with transaction.atomic():
        request = ApprovalRequest.objects.create(
            tenant=run.tenant,  # the run's, already loaded: the broadcast below needs its slug
            call=call,
            agent_id=run.agent_id,
            skill_name=call.name,
            skill_version=skill_version or "",
            effect=effect,
            action={
                "skill": call.name,
                "version": skill_version or "",
                "effect": effect,
                "data_classification": risk.get("data_classification")
                or getattr(call.skill_version, "data_classification", "internal"),
                "arguments": call.arguments,
            },  # the redacted form; approvers see the real one at render time
            arguments_sha256=call.arguments_sha256 or sha256_of(raw_arguments(call)),
            policy_version=str(decision.get("policy_version") or ""),
            rule_id=str(decision.get("rule_id") or ""),
            reason=redact_text(decision.get("floor") or decision.get("reason") or ""),
            taint_source=redact_text(_taint_source(decision, run), limit=300),
            context=redact(
                {
                    "run_id": str(run.pk),
                    "call_id": call.call_id,
                    "agent": run.agent.name,
                    "agent_role": run.agent.role,
                    "end_user": run.end_user,
                    "end_user_roles": run.end_user_roles,
                    "task": run.task,
                    "scope": decision.get("scope", ""),
                    "recent_steps": _recent_steps(call),
                }
            ),
            approval_mode=mode,
            required_approvals=2 if mode == ApprovalMode.TWO_PERSON else 1,
            delay_seconds=undo_delay(manifest),
            created_at=now,
            expires_at=now + approval_ttl(manifest=manifest, tenant=run.tenant),
            **routing_rules.routing_of(call),
        )
        _record(
            request,
            actor=Actor(label=f"agent:{run.agent.name}"),
            action="requested",
            to_status=ApprovalStatus.PENDING,
            detail={
                "rule_id": request.rule_id,
                "policy_version": request.policy_version,
                "arguments_sha256": request.arguments_sha256,
                **({"group": request.group.name, "route": request.route_name} if request.group_id else {}),
            },
        )
        append_event(run=run, kind="approval.requested", payload={"approval_id": request.pk, "call_id": call.call_id})
        broadcast.approval_changed(request)
        notifications.announce_new_request(request)
    _record_span(
        run=run,
        kind="approval_request",
        name="approval.requested",
        started_at=now,
        ended_at=now,
        call=call,
        skill_name=call.name,
        skill_version=skill_version or "",
        verdict="confirm",
        attributes={"approval_id": request.pk, "rule_id": request.rule_id, "reason": request.reason},
    )
    return request


# --- deciding ---------------------------------------------------------------------------------


class AlreadyDecided(Exception):
    """The request left `pending` before this decision: the first decision won."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(request.decided_summary())


class DecisionRefused(PermissionDenied):
    """This person may not make this decision (their own run, or a second vote of theirs)."""


class NotInRoutedGroup(DecisionRefused):
    """The request is routed to a group this approver is not in (tenant admins included: seeing all is
    oversight, deciding stays with the group; an admin who must decide adds themselves, on the record)."""


def require_routed_to(approval: ApprovalRequest, user) -> None:
    if not approval.routed_to_user(user):
        raise NotInRoutedGroup(
            f"This request is routed to the approver group {approval.group.name}; only its members decide it."
        )


class InvalidDecision(ValueError):
    def __init__(self, message: str, fields: list[dict] | None = None) -> None:
        self.fields = fields or []
        super().__init__(message)


@dataclass
class _Edit:
    raw: Any
    masked: Any
    sha256: str
    changes: list[dict]


def _input_schema(approval: ApprovalRequest) -> dict | None:
    schema = _manifest_of(approval.call).get("input_schema")
    return schema if isinstance(schema, dict) else None


def _validated_edit(approval: ApprovalRequest, arguments: Any) -> _Edit | None:
    """Edited arguments, re-validated against the exact schema version the call was resolved to."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise InvalidDecision(f"The edited arguments are not valid JSON: {exc.msg} (line {exc.lineno}).") from exc
    if not isinstance(arguments, dict):
        raise InvalidDecision("The edited arguments must be a JSON object.")
    original = raw_arguments(approval.call)
    edited = unmask(arguments, original)
    if edited == original:
        return None
    schema = _input_schema(approval)
    if schema is not None:
        validator = SchemaValidator(schema, format_checker=SchemaValidator.FORMAT_CHECKER)  # patterns on RE2
        try:
            errors = sorted(validator.iter_errors(edited), key=lambda e: list(e.absolute_path))
        except UnsupportedPattern as exc:
            raise InvalidDecision(
                f"{approval.skill_name} {approval.skill_version} has an input pattern Airlock "
                f"cannot run safely ({exc}); approve the arguments as proposed or decline."
            ) from None
        if errors:
            fields = [
                {"path": "/" + "/".join(str(p) for p in error.absolute_path), "message": error.message}
                for error in errors
            ]
            raise InvalidDecision(
                f"The edited arguments do not match the schema of {approval.skill_name} {approval.skill_version}.",
                fields,
            )
    decision = decision_on(approval.call, edited)
    if decision is not None and decision.verdict == "deny":
        raise InvalidDecision(
            f"The policy would deny the edited call ({decision.rule_id}): {decision.reason}",
            [{"path": "", "message": decision.reason, "rule_id": decision.rule_id}],
        )
    data_class = approval.action.get("data_classification") or "internal"
    return _Edit(
        raw=edited,
        masked=redact(edited, schema=schema, data_classification=data_class),
        sha256=sha256_of(edited),
        changes=[_stored_change(change, data_class) for change in edit_changes(approval, edited)],
    )


def require_decider(user, approval: ApprovalRequest) -> None:
    """Who may decide a request, and take it back during its undo window: the rule written once (an approver
    of its tenant, in its routed group once it has one)."""
    require_role(user, approval.tenant, Role.APPROVER)
    require_routed_to(approval, user)


def may_decide(user, approval: ApprovalRequest) -> bool:
    """`require_decider` as a yes or no, for pages that offer the buttons."""
    try:
        require_decider(user, approval)
    except PermissionDenied:
        return False
    return True


def preview_edit(*, approval: ApprovalRequest, user, arguments: Any) -> list[dict]:
    """What approving with these arguments would change, checked as the decision will be (schema and policy);
    raises InvalidDecision with the reason when it would be refused. Records nothing."""
    require_decider(user, approval)
    edit = _validated_edit(approval, arguments)
    return [] if edit is None else edit_changes(approval, edit.raw)


def edit_changes(approval: ApprovalRequest, edited: Any) -> list[dict]:
    """What an edit changes, as an approver may see it (sensitive fields masked)."""
    schema = _input_schema(approval)
    return diff(mask(raw_arguments(approval.call), schema), mask(edited, schema))


def _stored_change(change: dict, data_class: str) -> dict:
    """A change as the audit log keeps it: no argument value of a confidential skill at rest."""
    return {
        **change,
        "from": redact(change["from"], data_classification=data_class),
        "to": redact(change["to"], data_classification=data_class),
    }


def _label(user) -> str:
    return user.get_username()


def decide_approval(
    *,
    approval: ApprovalRequest,
    user,
    decision: str,
    reason: str = "",
    arguments: Any = None,
    answer: str = "",
    via: str = "console",
) -> ApprovalRequest:
    """Approve, answer (an agent's human.ask) or decline a pending request; the first decision wins, later ones
    get AlreadyDecided."""
    require_decider(user, approval)
    reason = redact_text((reason or "").strip())  # shown to the agent and kept: a pasted secret is masked
    if decision == "decline":
        if not reason:
            raise InvalidDecision("Say why you decline: the reason is shown to the agent and kept in the audit log.")
        return _finish_decision(approval, user=user, to_status=ApprovalStatus.DECLINED, reason=reason, via=via)
    if decision not in ("approve", "answer"):
        raise InvalidDecision("The decision must be 'approve', 'answer' or 'decline'.")
    if (decision == "answer") != questions.is_question(approval):
        raise InvalidDecision(
            "This is an agent's question: answer it, or decline to."
            if decision == "approve"
            else "Only an agent's question (human.ask) is answered; approve or decline this request."
        )
    if approval.acts_for(user):
        raise DecisionRefused("You cannot approve a run that acts on your own behalf; another approver must.")
    if decision == "answer":
        try:
            answer = questions.checked_answer(approval, answer)
        except questions.InvalidAnswer as exc:
            raise InvalidDecision(str(exc)) from None
        return _finish_decision(
            approval, user=user, to_status=ApprovalStatus.APPROVED, reason=reason, via=via, answer=answer
        )
    edit = _validated_edit(approval, arguments) if arguments not in (None, "") else None
    if approval.required_approvals > 1:
        if edit is not None:
            raise InvalidDecision("Two-person requests are approved as proposed; decline if the arguments are wrong.")
        return _vote(approval, user=user, reason=reason, via=via)
    return _finish_decision(approval, user=user, to_status=ApprovalStatus.APPROVED, reason=reason, via=via, edit=edit)


def ask_the_agent(*, approval: ApprovalRequest, user, question: str, via: str = "console") -> ApprovalEvent:
    """An approver's question back to the agent about a pending request, before deciding it: on the run's
    event feed (the agent's long poll and webhook, `approval.question`), its trace and the audit log. The
    request stays pending; the agent answers by what it does next (it may cancel, or call again)."""
    require_decider(user, approval)
    text = redact_text((question or "").strip())
    if not text:
        raise InvalidDecision("Write the question you want the agent to answer.")
    if len(text) > questions.MAX_TEXT_CHARS:
        raise InvalidDecision(f"A question to the agent holds at most {questions.MAX_TEXT_CHARS} characters.")
    now = timezone.now()
    with transaction.atomic():
        locked = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
        if locked.status != ApprovalStatus.PENDING:
            raise AlreadyDecided(locked)
        event = _record(
            approval,
            actor=Actor.of(user),
            action="asked_agent",
            from_status=ApprovalStatus.PENDING,
            to_status=ApprovalStatus.PENDING,
            detail={"question": text, "via": via},
        )
        append_event(
            run=approval.call.run,
            kind="approval.question",
            payload={
                "approval_id": approval.pk,
                "call_id": approval.call.call_id,
                "question": text,
                "asked_by": _label(user),
            },
        )
        broadcast.approval_changed(approval)
    _record_span(
        run=approval.call.run,
        kind="approval",
        name="approval.question",
        started_at=now,
        ended_at=now,
        call=approval.call,
        skill_name=approval.skill_name,
        skill_version=approval.skill_version,
        attributes={"approval_id": approval.pk, "asked_by": _label(user), "question": text},
    )
    return event


def _refuse_if_not_pending(approval: ApprovalRequest) -> None:
    approval.refresh_from_db()
    if approval.is_expired_now:
        expire_approval(approval=approval)
        approval.refresh_from_db()
    raise AlreadyDecided(approval)


def _finish_decision(
    approval: ApprovalRequest,
    *,
    user,
    to_status: str,
    reason: str,
    via: str,
    edit: _Edit | None = None,
    extra: dict | None = None,
    answer: str = "",
) -> ApprovalRequest:
    now = timezone.now()
    updates: dict[str, Any] = {
        "decided_at": now,
        "decided_by": user,
        "decided_by_label": _label(user),
        "decided_via": via,
    }
    if answer:
        updates["answer"] = answer
        extra = {**(extra or {}), "answer": answer}
    if to_status == ApprovalStatus.DECLINED:
        updates["decline_reason"] = reason
    if edit is not None:
        updates.update(
            sealed_edited_arguments=seal(edit.raw), edited_arguments=edit.masked, edited_arguments_sha256=edit.sha256
        )
    with transaction.atomic():
        won = lifecycle.decide(approval, to=to_status, now=now, **updates)
        if won:
            _record_decision(approval, user=user, to_status=to_status, reason=reason, via=via, edit=edit, extra=extra)
    if not won:
        _refuse_if_not_pending(approval)
    _record_span(
        run=approval.call.run,
        kind="approval_decision",
        name=f"approval.{to_status}",
        started_at=approval.created_at,
        ended_at=now,
        call=approval.call,
        skill_name=approval.skill_name,
        skill_version=approval.skill_version,
        verdict="confirm",
        outcome=to_status,
        attributes={"approval_id": approval.pk, "decided_by": approval.decided_by_label, "edited": edit is not None},
    )
    return approval


def _record_decision(
    approval: ApprovalRequest, *, user, to_status: str, reason: str, via: str, edit: _Edit | None, extra: dict | None
) -> None:
    detail: dict[str, Any] = {"via": via, **(extra or {})}
    if reason:
        detail["reason"] = reason
    if edit is not None:
        detail.update(edited=True, changes=edit.changes, arguments_sha256=edit.sha256)
    _record(
        approval,
        actor=Actor.of(user),
        action=to_status,
        from_status=ApprovalStatus.PENDING,
        to_status=to_status,
        detail=detail,
    )
    _after_decision(approval)


def _after_decision(approval: ApprovalRequest) -> None:
    """Inside the deciding transaction: tell the agent, the approvers, and enqueue the resume task (after the
    skill's undo window, when it has one)."""
    decision = approval.status
    if approval.status == ApprovalStatus.APPROVED and approval.delay_seconds:
        _schedule(approval)
    append_event(
        run=approval.call.run,
        kind="approval.decided",
        payload={
            "approval_id": approval.pk,
            "call_id": approval.call.call_id,
            "decision": decision,
            "decided_by": approval.decided_by_label,
            **({"runs_at": approval.scheduled_for.isoformat()} if approval.is_scheduled else {}),
        },
    )
    broadcast.approval_changed(approval)
    if approval.is_scheduled:
        countdown, approval_id = resume_countdown(approval), approval.pk
        transaction.on_commit(lambda: tasks.resume_call.apply_async((approval_id,), countdown=countdown))
    else:
        tasks.resume_call.delay_on_commit(approval.pk)


def resume_countdown(approval: ApprovalRequest) -> float:
    """Seconds until a scheduled call is due, capped below the broker's visibility timeout: a delayed task
    held longer would be delivered again and again (the task re-enqueues itself for what is left)."""
    if not approval.is_scheduled:
        return 0.0
    remaining = (approval.scheduled_for - clock.now()).total_seconds()
    return max(0.0, min(remaining, settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] / 2))


def _schedule(approval: ApprovalRequest) -> None:
    """Approved → scheduled: the call runs once its undo window is over, unless an approver cancels it first."""
    runs_at = clock.now() + timedelta(seconds=approval.delay_seconds)
    if not lifecycle.schedule(approval, runs_at=runs_at):
        return
    _record(
        approval,
        actor=SYSTEM,
        action="scheduled",
        from_status=ApprovalStatus.APPROVED,
        to_status=ApprovalStatus.SCHEDULED,
        detail={"runs_at": runs_at.isoformat(), "delay_seconds": approval.delay_seconds},
    )
    _record_span(  # in its own savepoint: kept only if the decision commits
        run=approval.call.run,
        kind="approval",
        name="approval.scheduled",
        started_at=approval.decided_at or runs_at,
        ended_at=approval.decided_at or runs_at,
        call=approval.call,
        skill_name=approval.skill_name,
        skill_version=approval.skill_version,
        outcome=ApprovalStatus.SCHEDULED,
        attributes={
            "approval_id": approval.pk,
            "runs_at": runs_at.isoformat(),
            "delay_seconds": approval.delay_seconds,
        },
    )


class TooLateToCancel(Exception):
    """The request is not waiting out an undo window (any more): its call started, or it never had one."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        if request.status in (ApprovalStatus.EXECUTING, ApprovalStatus.EXECUTED, ApprovalStatus.FAILED):
            message = "The call has already started; it can no longer be cancelled."
        elif request.status == ApprovalStatus.CANCELLED and request.cancelled_by_label:
            message = f"{request.cancelled_by_label} already cancelled it: {request.decline_reason}"
        elif request.is_pending:
            message = "The request is still pending: decline it instead."
        else:
            message = f"The request is {request.status}; only a scheduled call can be cancelled."
        super().__init__(message)


def cancel_scheduled_approval(*, approval: ApprovalRequest, user, reason: str, via: str = "console") -> ApprovalRequest:
    """Take an approved call back during its undo window. Anyone who could decide the request may; racing
    the worker that starts the call, one conditional UPDATE decides and the loser gets TooLateToCancel."""
    require_decider(user, approval)
    reason = redact_text((reason or "").strip())
    if not reason:
        raise InvalidDecision("Say why you cancel: the reason is shown to the agent and kept in the audit log.")
    if not _cancel_scheduled(approval, actor=Actor.of(user), reason=reason, via=via):
        approval.refresh_from_db()
        raise TooLateToCancel(approval)
    return approval


def _cancel_scheduled(approval: ApprovalRequest, *, actor: Actor, reason: str, via: str) -> bool:
    now = timezone.now()
    with transaction.atomic():
        if not lifecycle.cancel_scheduled(approval, cancelled_by_label=actor.label, decline_reason=reason):
            return False
        _record(
            approval,
            actor=actor,
            action="cancelled",
            from_status=ApprovalStatus.SCHEDULED,
            to_status=ApprovalStatus.CANCELLED,
            detail={"via": via, "reason": reason, "runs_at": approval.scheduled_for.isoformat()},
        )
        append_event(
            run=approval.call.run,
            kind="approval.decided",
            payload={
                "approval_id": approval.pk,
                "call_id": approval.call.call_id,
                "decision": ApprovalStatus.CANCELLED,
                "decided_by": actor.label,
            },
        )
        broadcast.approval_changed(approval)
        tasks.resume_call.delay_on_commit(approval.pk)  # records the refusal the agent receives
    _record_span(
        run=approval.call.run,
        kind="approval_decision",
        name="approval.cancelled",
        started_at=approval.decided_at or now,
        ended_at=now,
        call=approval.call,
        skill_name=approval.skill_name,
        skill_version=approval.skill_version,
        outcome=ApprovalStatus.CANCELLED,
        attributes={"approval_id": approval.pk, "cancelled_by": actor.label, "reason": reason},
    )
    return True


def _vote(approval: ApprovalRequest, *, user, reason: str, via: str) -> ApprovalRequest:
    """A two-person request: record this approver's vote; the last needed vote approves it."""
    with transaction.atomic():
        locked = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
        if locked.is_pending and not locked.is_expired_now:
            return _vote_locked(locked, user=user, reason=reason, via=via)
    _refuse_if_not_pending(approval)
    return approval  # unreachable: _refuse_if_not_pending always raises


def _vote_locked(locked: ApprovalRequest, *, user, reason: str, via: str) -> ApprovalRequest:
    earlier = locked.votes.filter(user=user).first()
    if earlier is not None:
        raise DecisionRefused(
            f"You already approved this at {earlier.created_at:%Y-%m-%d %H:%M:%S} UTC; "
            "a second, different approver must approve it too."
        )
    ApprovalVote.objects.create(request=locked, user=user)
    counted = locked.votes.all()
    if locked.group_id is not None:  # routed: only the votes of those who may decide it now (its group's members)
        counted = counted.filter(user__in=locked.deciders().values("pk"))
    votes = counted.count()
    voters = list(counted.values_list("user__username", flat=True))
    if votes < locked.required_approvals:
        _record(
            locked,
            actor=Actor.of(user),
            action="vote",
            from_status=ApprovalStatus.PENDING,
            to_status=ApprovalStatus.PENDING,
            detail={
                "via": via,
                "votes": votes,
                "required": locked.required_approvals,
                **({"reason": reason} if reason else {}),
            },
        )
        broadcast.approval_changed(locked)
        return locked
    return _finish_decision(
        locked,
        user=user,
        to_status=ApprovalStatus.APPROVED,
        reason=reason,
        via=via,
        extra={"votes": votes, "approvers": voters},
    )


def _close_by_system(approval: ApprovalRequest, *, to_status: str, label: str, reason: str) -> bool:
    now = timezone.now()
    with transaction.atomic():
        won = lifecycle.close_pending(
            approval,
            to=to_status,
            decided_at=now,
            decided_by=None,
            decided_by_label=label,
            decided_via="system",
            decline_reason=reason,
        )
        if not won:
            return False
        _record(
            approval,
            actor=SYSTEM,
            action=to_status,
            from_status=ApprovalStatus.PENDING,
            to_status=to_status,
            detail={"reason": reason},
        )
        _after_decision(approval)
    return True


def expire_approval(*, approval: ApprovalRequest) -> bool:
    """Expiry counts as a decline, never as consent."""
    return _close_by_system(
        approval,
        to_status=ApprovalStatus.EXPIRED,
        label="system (expired)",
        reason=f"No approver decided before {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC.",
    )


def expire_due_approvals(*, now=None) -> int:
    now = now or timezone.now()
    due = ApprovalRequest.objects.pending().filter(expires_at__lte=now).select_related("tenant", "call__run")
    return sum(1 for approval in due if expire_approval(approval=approval))


def cancel_approvals_for_run(*, run, reason: str) -> int:
    """For the gate: the run was cancelled, so its pending requests are too, and its approved calls still in
    their undo window."""
    waiting = ApprovalRequest.objects.filter(
        call__run=run, status__in=[ApprovalStatus.PENDING, ApprovalStatus.SCHEDULED]
    ).select_related("tenant", "call__run")
    cancelled = 0
    for approval in waiting:
        if approval.is_scheduled:
            cancelled += _cancel_scheduled(
                approval, actor=Actor(label="system (run closed)"), reason=reason, via="system"
            )
        else:
            cancelled += _close_by_system(
                approval, to_status=ApprovalStatus.CANCELLED, label="system (cancelled)", reason=reason
            )
    return cancelled


def cancel_when_run_closes(event) -> None:
    """Run event listener: a run the agent closed will never resume, so its pending requests are cancelled."""
    if approval_outcomes.closes_run(event):
        stopped_by = event.payload.get("stopped_by")
        reason = (
            f"{stopped_by} stopped the run: {event.payload.get('reason') or 'no reason given'}"
            if stopped_by
            else f"The agent closed the run as {event.payload['status']}."
        )
        cancel_approvals_for_run(run=event.run, reason=reason)


def escalation_threshold(approval: ApprovalRequest) -> timedelta:
    """Escalate after AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES (default 15) or half the TTL, whichever is first."""
    configured = timedelta(minutes=settings.AIRLOCK_APPROVAL_ESCALATE_AFTER_MINUTES)
    return min(configured, (approval.expires_at - approval.created_at) / 2)


def _fallback_recipients(approval: ApprovalRequest) -> list[str]:
    """The fallback group's members who may now decide the escalated request, by e-mail address."""
    if approval.fallback_group_id is None:
        return []
    members = approval.deciders().filter(approver_groups=approval.fallback_group_id).exclude(email="")
    return sorted({user.email for user in members if not approval.acts_for(user)})


def escalate_overdue_approvals(*, now=None) -> int:
    """Email the tenant's admins once about each request pending past the threshold; a routed request
    with a fallback group also goes to that group, who see and decide it from then on."""
    now = now or timezone.now()
    escalated = 0
    overdue = ApprovalRequest.objects.pending().filter(escalated_at__isnull=True)
    for approval in overdue.select_related("tenant", "fallback_group"):
        if now - approval.created_at < escalation_threshold(approval):
            continue
        with transaction.atomic():
            if not ApprovalRequest.objects.filter(
                pk=approval.pk, escalated_at__isnull=True, status=ApprovalStatus.PENDING
            ).update(escalated_at=now):
                continue
            approval.escalated_at = now
            admins = list(
                get_user_model()
                .objects.filter(memberships__tenant=approval.tenant, memberships__role=Role.ADMIN, is_active=True)
                .exclude(email="")
                .values_list("email", flat=True)
                .distinct()
            )
            fallback = _fallback_recipients(approval)
            admins += [email for email in fallback if email not in admins]
            detail = {"notified": admins}
            if approval.fallback_group_id is not None:
                detail["fallback_group"] = approval.fallback_group.name
            _record(approval, actor=SYSTEM, action="escalated", detail=detail)
            broadcast.approval_changed(approval)
            url = public_reverse("approvals:detail", args=[approval.pk])
            transaction.on_commit(
                lambda a=approval, to=admins, u=url: (
                    send_mail(
                        subject=f"[Airlock] {a.tenant.slug}: approval {a.pk} ({a.skill_name}) waiting since "
                        f"{a.created_at:%H:%M} UTC",
                        message=(
                            f"Approval request {a.pk} for {a.skill_name} by agent {a.context.get('agent')} has been "
                            f"pending since {a.created_at:%Y-%m-%d %H:%M} UTC and expires at "
                            f"{a.expires_at:%Y-%m-%d %H:%M} UTC.\nReason: {a.reason}\nOpen it: {u}\n"
                        ),
                        from_email=None,
                        recipient_list=to,
                        fail_silently=True,
                    )
                    if to
                    else None
                )
            )
        escalated += 1
    return escalated


# --- resuming the paused call -------------------------------------------------------------------


def negative_result(approval: ApprovalRequest) -> dict:
    """The result an agent receives for a declined, expired or cancelled request: do not retry."""
    call_id = approval.call.call_id
    if approval.status == ApprovalStatus.DECLINED:
        error = {
            "class": "declined",
            "code": "approval_declined",
            "message": f"{approval.decided_by_label} declined this call: {approval.decline_reason} "
            "Do not retry it; ask the user or propose something different.",
        }
    elif approval.status == ApprovalStatus.EXPIRED:
        error = {
            "class": "expired",
            "code": "approval_expired",
            "message": f"{approval.decline_reason} The call was not executed. Do not retry it automatically.",
        }
    elif approval.cancelled_by_label:
        error = {
            "class": "declined",
            "code": "approval_cancelled",
            "message": f"{approval.cancelled_by_label} cancelled this approved call before it ran: "
            f"{approval.decline_reason} Do not retry it; ask the user or propose something different.",
        }
    else:
        error = {
            "class": "declined",
            "code": "approval_cancelled",
            "message": f"The approval request was cancelled: {approval.decline_reason} Do not retry it.",
        }
    return {"call_id": call_id, "status": "error", "is_error": True, "approval_id": approval.pk, "error": error}


def _arguments_for_execution(approval: ApprovalRequest) -> Any:
    if approval.sealed_edited_arguments:
        arguments = unseal(approval.sealed_edited_arguments)
        expected = approval.edited_arguments_sha256
    else:
        arguments = raw_arguments(approval.call)
        expected = approval.arguments_sha256
    if sha256_of(arguments) != expected:
        raise RuntimeError(f"The arguments of approval {approval.pk} no longer match the approved hash.")
    return questions.with_answer(approval, arguments)


def _complete(approval: ApprovalRequest, *, from_status: str, to_status: str, result: dict) -> bool:
    """Record the outcome exactly once; the loser of a race (a re-delivered task) does nothing."""
    result = redact(result)  # already redacted when the call ran; the approval's own copy is checked too
    now = timezone.now()
    with transaction.atomic():
        completed = {"outcome": result, "completed_at": now, "last_error": "", "sealed_edited_arguments": ""}
        if from_status == to_status:
            won = lifecycle.complete_refused(approval, **completed)
        else:
            won = lifecycle.finish(approval, to=to_status, **completed)
        if not won:
            return False
        if from_status != to_status:
            error = result.get("error") or {}
            detail = {"is_error": bool(result.get("is_error"))}
            if error:
                detail.update(
                    error_class=error.get("class"),
                    error_code=error.get("code"),
                    message=str(error.get("message", ""))[:500],
                )
            _record(
                approval, actor=SYSTEM, action=to_status, from_status=from_status, to_status=to_status, detail=detail
            )
        else:
            _record(approval, actor=SYSTEM, action="outcome_recorded", detail={"is_error": True})
        append_event(
            run=approval.call.run,
            kind="call.completed",
            payload={"call_id": approval.call.call_id, "approval_id": approval.pk, "result": result},
        )
        approval_outcomes.resume_run_if_unblocked(approval.call.run)
        broadcast.approval_changed(approval)
    _record_span(
        run=approval.call.run,
        kind="approval",
        name="approval.resumed",
        started_at=approval.decided_at or now,
        ended_at=now,
        call=approval.call,
        skill_name=approval.skill_name,
        skill_version=approval.skill_version,
        outcome=to_status,
        error_class=(result.get("error") or {}).get("class", "") if result.get("is_error") else "",
        attributes={"approval_id": approval.pk},
    )
    return True


def resume_approval(*, approval_id: int) -> ApprovalRequest:
    """The resume task's work. Claims with a conditional update, so a re-delivered task never acts twice.

    A re-delivery while the first worker's lease on the call is live raises
    `runs.services.CallHeldElsewhere` (the task retries later). After a worker died and its lease
    expired, a read or idempotent skill is re-claimed and re-run with the same idempotency key; any
    other write becomes `timeout_unknown` with a reconciliation item and never runs again. Either way
    the outcome is recorded here once.
    """
    approval = ApprovalRequest.objects.select_related("call__run", "tenant", "call__skill_version").get(pk=approval_id)
    if approval.completed_at is not None or approval.status == ApprovalStatus.PENDING:
        return approval
    if approval.is_scheduled and approval.scheduled_for > clock.now():
        return approval  # before its time: the task enqueues itself for what is left (resume_countdown)
    if approval.status in NEGATIVE_STATUSES:
        result = negative_result(approval)
        with transaction.atomic():
            approval_outcomes.settle_refused(call=approval.call, result=result)
            _complete(approval, from_status=approval.status, to_status=approval.status, result=result)
        return approval
    if approval.status in lifecycle.approval_sources(ApprovalStatus.EXECUTING):
        from_status = approval.status
        with transaction.atomic():  # the claim and its audit row commit together
            claimed = lifecycle.claim_execution(approval)
            # Only the claim's columns: the call, run and tenant read above stay loaded for what follows.
            approval.refresh_from_db(fields=["status", "resume_attempts", "completed_at"])
            if claimed:
                _record(
                    approval,
                    actor=SYSTEM,
                    action="executing",
                    from_status=from_status,
                    to_status=ApprovalStatus.EXECUTING,
                )
                broadcast.approval_changed(approval)
    elif approval.status == ApprovalStatus.EXECUTING:  # a re-delivered task after a crash
        ApprovalRequest.objects.filter(pk=approval.pk).update(resume_attempts=F("resume_attempts") + 1)
    if approval.status != ApprovalStatus.EXECUTING or approval.completed_at is not None:
        return approval
    result = approval_outcomes.execute_approved(
        call=approval.call, arguments=lambda: _arguments_for_execution(approval)
    )
    final = ApprovalStatus.FAILED if result.get("is_error") else ApprovalStatus.EXECUTED
    _complete(
        approval, from_status=ApprovalStatus.EXECUTING, to_status=final, result={**result, "approval_id": approval.pk}
    )
    approval.refresh_from_db()
    return approval


def resume_orphaned_approvals() -> int:
    """Beat: approved requests whose resume task was lost (approved for a while and never claimed), scheduled
    ones past their time by more than a beat (a worker lost the delayed task, or ran it early), or ones whose
    call already has its final outcome (the lease sweep settled it): enqueue the resume again; it executes
    nothing twice, and records the outcome once."""
    waiting = ApprovalRequest.objects.filter(
        status__in=[ApprovalStatus.APPROVED, ApprovalStatus.SCHEDULED, ApprovalStatus.EXECUTING],
        completed_at__isnull=True,
    )
    lost = timezone.now() - ORPHAN_AFTER
    overdue = clock.now() - SCHEDULE_SLACK
    orphans = list(
        waiting.filter(
            approval_outcomes.with_outcome("call")
            | Q(status=ApprovalStatus.APPROVED, decided_at__lt=lost)
            | Q(status=ApprovalStatus.SCHEDULED, scheduled_for__lt=overdue)
        ).values_list("pk", flat=True)[:100]
    )
    for approval_id in orphans:
        tasks.resume_call.delay(approval_id)
    return len(orphans)


def record_resume_failure(*, approval_id: int, error: str, final: bool) -> None:
    """The resume task failed unexpectedly; after the last retry the call is recorded as failed."""
    ApprovalRequest.objects.filter(pk=approval_id).update(last_error=redact_text(error, limit=2000))
    if not final:
        return
    approval = ApprovalRequest.objects.select_related("call__run", "tenant").get(pk=approval_id)
    if approval.status != ApprovalStatus.EXECUTING:
        return
    result = {
        "call_id": approval.call.call_id,
        "status": "error",
        "is_error": True,
        "approval_id": approval.pk,
        "error": {
            "class": "internal",
            "code": "resume_failed",
            "message": "Airlock could not complete this approved call; an operator has the details.",
        },
    }
    _complete(approval, from_status=ApprovalStatus.EXECUTING, to_status=ApprovalStatus.FAILED, result=result)
