"""Shapes of the approver API: the decision body (validated), and the contract's `approval` object, built
as a plain dict by approval_to_dict and described by ApprovalSerializer."""

from rest_framework import serializers

from approvals.models import ApprovalRequest
from approvals.presentation import downstream_of, shown_arguments
from runs.api.serializers import CallResultSerializer


def approval_to_dict(approval: ApprovalRequest, user, routed_ids: set[int] | None = None) -> dict:
    """Approvers of the tenant get the real arguments of an open request (sensitive fields masked);
    everyone else, and everyone once the call is final, the redacted form kept at rest."""
    manifest = (approval.call.skill_version.manifest if approval.call.skill_version_id else None) or {}
    action = {
        **approval.action,
        "arguments": shown_arguments(approval, user, routed_ids),
        "downstream": downstream_of(manifest),
        "credential": (manifest.get("execution") or {}).get("credential") or None,
        "idempotency_key": approval.call.idempotency_key or None,
    }
    return {
        "id": approval.pk,
        "tenant": approval.tenant.slug,
        "status": approval.status,
        "proposed_action": action,
        "reason": approval.reason,
        "rule_id": approval.rule_id,
        "policy_version": approval.policy_version,
        "taint_source": approval.taint_source,
        "arguments_sha256": approval.arguments_sha256,
        "context": approval.context,
        "approval_mode": approval.approval_mode,
        "required_approvals": approval.required_approvals,
        "approvals": [vote.user.get_username() for vote in approval.votes.all()],
        "created_at": approval.created_at.isoformat(),
        "expires_at": approval.expires_at.isoformat(),
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "decided_by": approval.decided_by_label or None,
        "decided_via": approval.decided_via or None,
        "decline_reason": approval.decline_reason or None,
        "edited_arguments": approval.edited_arguments,
        "delay_seconds": approval.delay_seconds,
        "scheduled_for": approval.scheduled_for.isoformat() if approval.scheduled_for else None,
        "cancelled_by": approval.cancelled_by_label or None,
        "outcome": approval.outcome,
        "group": approval.group.name if approval.group_id else None,
        "fallback_group": approval.fallback_group.name if approval.fallback_group_id else None,
        "escalated_at": approval.escalated_at.isoformat() if approval.escalated_at else None,
    }


class ApprovalDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["approve", "decline", "answer"],
        help_text="`answer` (with `answer`) for an agent's human.ask question; `approve` or `decline` otherwise.",
    )
    answer = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        trim_whitespace=False,
        help_text="The answer to a human.ask question: one of its choices when it gives some.",
    )
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Required to decline: shown to the agent and kept in the audit log.",
    )
    arguments = serializers.JSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Approve with these arguments instead (checked against the skill's "
        "input schema and the policy again).",
    )


class ApprovalCancelSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=2000, help_text="Why the approved call must not run: shown to the agent and kept in the audit log."
    )


class ApprovalActionSerializer(serializers.Serializer):
    skill = serializers.CharField()
    version = serializers.CharField(allow_blank=True)
    effect = serializers.CharField(allow_blank=True)
    data_classification = serializers.CharField(allow_blank=True, allow_null=True)
    arguments = serializers.JSONField(
        help_text="The call's arguments: real (sensitive fields masked) for approvers "
        "of an open request, else the redacted form kept at rest."
    )
    downstream = serializers.CharField(help_text="Where approving sends the call, in words.")
    credential = serializers.CharField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True)


class RecentStepSerializer(serializers.Serializer):
    call_id = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    verdict = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()


class ApprovalContextSerializer(serializers.Serializer):
    run_id = serializers.CharField(required=False)
    call_id = serializers.CharField(required=False)
    agent = serializers.CharField(required=False)
    agent_role = serializers.CharField(required=False)
    end_user = serializers.CharField(required=False, allow_blank=True)
    end_user_roles = serializers.ListField(child=serializers.CharField(), required=False)
    task = serializers.CharField(required=False, allow_blank=True)
    scope = serializers.CharField(required=False, allow_blank=True)
    recent_steps = RecentStepSerializer(many=True, required=False)


class ApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tenant = serializers.CharField()
    status = serializers.CharField()
    proposed_action = ApprovalActionSerializer()
    reason = serializers.CharField(allow_blank=True)
    rule_id = serializers.CharField(allow_blank=True)
    policy_version = serializers.CharField(allow_blank=True)
    taint_source = serializers.CharField(allow_blank=True)
    arguments_sha256 = serializers.CharField()
    context = ApprovalContextSerializer(help_text="Who asked and what the run did before.")
    approval_mode = serializers.CharField()
    required_approvals = serializers.IntegerField()
    approvals = serializers.ListField(child=serializers.CharField(), help_text="Who approved so far.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField(allow_null=True)
    decided_via = serializers.CharField(allow_null=True)
    decline_reason = serializers.CharField(allow_null=True)
    edited_arguments = serializers.JSONField(allow_null=True, help_text="The approver's edit, masked for display.")
    delay_seconds = serializers.IntegerField(help_text="The skill's undo window: approved calls wait this long.")
    scheduled_for = serializers.DateTimeField(
        allow_null=True, help_text="When a `scheduled` call runs unless an approver cancels it first."
    )
    cancelled_by = serializers.CharField(allow_null=True, help_text="Who cancelled it during its undo window.")
    outcome = CallResultSerializer(allow_null=True, help_text="The result the agent received.")
    group = serializers.CharField(
        allow_null=True, help_text="The approver group the request is routed to; null: every approver of the tenant."
    )
    fallback_group = serializers.CharField(
        allow_null=True, help_text="The group that also decides it once it is escalated (overdue)."
    )
    escalated_at = serializers.DateTimeField(allow_null=True)


class ApprovalListSerializer(serializers.Serializer):
    results = ApprovalSerializer(many=True)
