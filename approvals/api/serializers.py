"""Plain-dict shapes of the approver API (the contract's `approval` object)."""

from approvals.models import ApprovalRequest


def approval_to_dict(approval: ApprovalRequest) -> dict:
    return {
        "id": approval.pk, "tenant": approval.tenant.slug, "status": approval.status,
        "proposed_action": approval.action, "reason": approval.reason, "rule_id": approval.rule_id,
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
