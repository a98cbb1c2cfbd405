"""Use cases of approvals: open a request, decide it, expire it, resume the paused call."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import broadcast
from approvals.masking import mask
from approvals.models import ApprovalEvent, ApprovalMode, ApprovalRequest, ApprovalStatus
from lib.canonical import sha256_of
from lib.sealing import unseal
from runs.events import append_event

logger = logging.getLogger(__name__)

RECENT_STEPS = 5


@dataclass
class Actor:
    """Who made a change: a person (user) or the system (expiry, resume task)."""

    label: str
    user: Any = None

    @classmethod
    def of(cls, user) -> Actor:
        return cls(label=user.get_username(), user=user)


SYSTEM = Actor(label="system")


def _record(request: ApprovalRequest, *, actor: Actor, action: str, from_status: str = "", to_status: str = "",
            detail: dict | None = None) -> ApprovalEvent:
    return ApprovalEvent.objects.create(request=request, actor=actor.user, actor_label=actor.label, action=action,
                                        from_status=from_status, to_status=to_status, detail=detail or {})


def _record_span(**kwargs: Any) -> None:
    """Spans go through traces.recording once that module exists; tracing never breaks approvals."""
    try:
        from traces.recording import record_span
    except ImportError:
        return
    try:
        record_span(**kwargs)
    except Exception:  # a trace is evidence, not a precondition
        logger.exception("could not record an approval span")


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


def _recent_steps(call) -> list[dict]:
    earlier = (type(call).objects.filter(run=call.run).exclude(pk=call.pk).order_by("-created_at", "-position")
               [:RECENT_STEPS])
    return [{"call_id": c.call_id, "name": c.name, "status": c.status, "verdict": c.verdict,
             "at": c.created_at.isoformat()} for c in reversed(list(earlier))]


def _taint_source(decision: dict, run) -> str:
    for key in ("taint_source", "taint"):
        value = decision.get(key)
        if isinstance(value, str) and value:
            return value
    return run.taint_source if run.tainted else ""


def raw_arguments(call) -> Any:
    return unseal(call.sealed_arguments) if call.sealed_arguments else call.arguments


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
    schema = manifest.get("input_schema") if isinstance(manifest.get("input_schema"), dict) else None
    now = timezone.now()
    with transaction.atomic():
        request = ApprovalRequest.objects.create(
            tenant_id=run.tenant_id, call=call, agent_id=run.agent_id, skill_name=call.name,
            skill_version=skill_version or "", effect=effect,
            action={"skill": call.name, "version": skill_version or "", "effect": effect,
                    "data_classification": risk.get("data_classification")
                    or getattr(call.skill_version, "data_classification", "internal"),
                    "arguments": mask(call.arguments, schema)},
            arguments_sha256=call.arguments_sha256 or sha256_of(raw_arguments(call)),
            policy_version=str(decision.get("policy_version") or ""), rule_id=str(decision.get("rule_id") or ""),
            reason=str(decision.get("reason") or ""), taint_source=_taint_source(decision, run)[:300],
            context={"run_id": str(run.pk), "call_id": call.call_id, "agent": run.agent.name,
                     "agent_role": run.agent.role, "end_user": run.end_user, "end_user_roles": run.end_user_roles,
                     "task": run.task, "scope": decision.get("scope", ""), "recent_steps": _recent_steps(call)},
            approval_mode=mode, required_approvals=2 if mode == ApprovalMode.TWO_PERSON else 1,
            created_at=now, expires_at=now + approval_ttl(manifest=manifest, tenant=run.tenant),
        )
        _record(request, actor=Actor(label=f"agent:{run.agent.name}"), action="requested",
                to_status=ApprovalStatus.PENDING,
                detail={"rule_id": request.rule_id, "policy_version": request.policy_version,
                        "arguments_sha256": request.arguments_sha256})
        append_event(run=run, kind="approval.requested", payload={"approval_id": request.pk, "call_id": call.call_id})
        broadcast.approval_changed(request)
    _record_span(run=run, kind="approval", name="approval.requested", started_at=now, ended_at=now, call=call,
                 skill_name=call.name, skill_version=skill_version or "", verdict="confirm",
                 attributes={"approval_id": request.pk, "rule_id": request.rule_id, "reason": request.reason})
    return request
