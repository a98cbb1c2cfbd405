"""The gateway's use cases, each through the service the REST API uses: start a session's run, put one
call through the gate, and read what became of a call that waited for approval."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from airlock_sdk.policy.kernel import Path

from approvals.models import ApprovalRequest
from console.models import Agent
from runs import gate, services
from runs.batch_input import MAX_EXPOSED_TOOLS, MAX_TOOL_NAME
from runs.errors import NotFound
from runs.models import Run


@dataclass(frozen=True)
class ApprovalState:
    """An approval as its agent may see it: its status, what was proposed, and, once recorded, the result."""

    approval_id: int
    status: str
    proposed_action: dict
    expires_at: str
    result: dict | None


def start_session_run(*, agent: Agent, end_user: str, task: str) -> UUID:
    """The run an MCP session's calls (or one sessionless call) belong to, started as POST /api/v1/runs
    starts one."""
    return services.start_run(agent=agent, end_user=end_user, task=task).pk


def propose_call(*, agent: Agent, run_id: UUID, call: dict, exposed: list[str] | None = None) -> dict:
    """One call through the gate, as POST /api/v1/runs/{id}/calls sends a batch of one: every check, the
    verdict, the execution and the record are the gate's. `exposed`: the tool names the session last
    listed, recorded as what its model was shown (when it fits the batch API's bounds)."""
    run = Run.objects.of_agent(agent).filter(pk=run_id).select_related("snapshot", "tenant")
    found = run.first()
    if found is None:
        return gate.error_result(call["call_id"], NotFound("This session's run is gone; open a new MCP session."))
    found.agent = agent  # as authenticated for this request: the trace records which of its keys it used
    fits = exposed is not None and len(exposed) <= MAX_EXPOSED_TOOLS and all(len(n) <= MAX_TOOL_NAME for n in exposed)
    exposed_tools = exposed if fits else None
    return gate.process_batch(run=found, calls=[call], exposed_tools=exposed_tools, path=Path.MCP_GATEWAY)[0]


def approval_state(*, agent: Agent, approval_id: int) -> ApprovalState | None:
    """None unless the approval belongs to a call of this agent (another tenant's, or another agent's, is
    answered exactly like one that does not exist)."""
    approval = (
        ApprovalRequest.objects.for_agent(agent)
        .filter(pk=approval_id, call__run__agent=agent)
        .only("pk", "status", "action", "expires_at", "outcome", "completed_at")
        .first()
    )
    if approval is None:
        return None
    recorded = approval.completed_at is not None and approval.outcome is not None
    return ApprovalState(
        approval_id=approval.pk,
        status=approval.status,
        proposed_action=approval.action,
        expires_at=approval.expires_at.isoformat(),
        result=approval.outcome if recorded else None,
    )
