"""Plain-dict shapes of the approver API (the contract's `approval` object)."""

from approvals.models import ApprovalRequest
from approvals.presentation import downstream_of, shown_arguments


def approval_to_dict(approval: ApprovalRequest, user, approver_tenant_ids: set[int] | None = None) -> dict:
    """Approvers of the tenant get the real arguments of an open request (sensitive fields masked);
    everyone else, and everyone once the call is final, the redacted form kept at rest."""
    manifest = (approval.call.skill_version.manifest if approval.call.skill_version_id else None) or {}
    action = {**approval.action, "arguments": shown_arguments(approval, user, approver_tenant_ids),
              "downstream": downstream_of(manifest),
              "credential": (manifest.get("execution") or {}).get("credential") or None,
              "idempotency_key": approval.call.idempotency_key or None}
    return {
        "id": approval.pk, "tenant": approval.tenant.slug, "status": approval.status,
        "proposed_action": action, "reason": approval.reason, "rule_id": approval.rule_id,
        "policy_version": approval.policy_version, "taint_source": approval.taint_source,
        "arguments_sha256": approval.arguments_sha256, "context": approval.context,
        "approval_mode": approval.approval_mode, "required_approvals": approval.required_approvals,
        "approvals": [vote.user.get_username() for vote in approval.votes.all()],
        "created_at": approval.created_at.isoformat(), "expires_at": approval.expires_at.isoformat(),
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "decided_by": approval.decided_by_label or None, "decided_via": approval.decided_via or None,
        "decline_reason": approval.decline_reason or None, "edited_arguments": approval.edited_arguments,
        "outcome": approval.outcome,
    }
