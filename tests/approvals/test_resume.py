"""Exactly-once execution of an approved call across a crashed and re-delivered resume task."""

import pytest

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval, resume_approval
from approvals.tasks import resume_call
from runs.models import RunEvent
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db


class WorkerKilled(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing in the task catches it."""


def _approved(acme, agent, approver):
    request = open_request(tenant=acme, agent=agent)
    decide_approval(approval=request, user=approver, decision="approve")  # resume not run: no on_commit here
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    return request


def test_crash_after_claim_before_execution_then_rerun_executes_once(acme, agent, approver, executions,
                                                                     monkeypatch):
    request = _approved(acme, agent, approver)
    import approvals.services as services

    def killed(approval):
        raise WorkerKilled()

    monkeypatch.setattr(services, "_arguments_for_execution", killed)
    with pytest.raises(WorkerKilled):
        resume_call.run(request.pk)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTING and request.completed_at is None and executions == []
    monkeypatch.undo()
    import tests.approvals.conftest as fake_gate

    monkeypatch.setattr("runs.services.execute_approved_call", fake_gate._fake_execute_approved_call(executions),
                        raising=False)
    resume_call.run(request.pk)  # the broker re-delivers the unacknowledged task
    resume_call.run(request.pk)  # and once more for good measure
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED and len(executions) == 1
    assert RunEvent.objects.filter(run=request.call.run, kind="call.completed").count() == 1


def test_crash_after_execution_before_recording_keeps_the_outcome(acme, agent, approver, executions, monkeypatch):
    request = _approved(acme, agent, approver)
    import approvals.services as services

    real_complete = services._complete

    def killed(*args, **kwargs):
        raise WorkerKilled()

    monkeypatch.setattr(services, "_complete", killed)
    with pytest.raises(WorkerKilled):
        resume_approval(approval_id=request.pk)
    assert len(executions) == 1
    monkeypatch.setattr(services, "_complete", real_complete)
    resume_approval(approval_id=request.pk)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED and len(executions) == 1
    assert request.outcome["content"]["refund_id"] == f"rf_{request.call.pk}"


def test_task_for_a_pending_request_does_nothing(acme, agent, executions):
    request = open_request(tenant=acme, agent=agent)
    resume_call.run(request.pk)
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.PENDING and executions == []
