"""Exactly-once execution of an approved call across a crashed, re-delivered or overlapping resume task."""

import contextlib
import threading

import pytest
from django.db import connection

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval, resume_approval
from approvals.tasks import resume_call
from runs.models import RunEvent
from tests.approvals import worker_tools
from tests.approvals.factories import DEFAULT_ARGUMENTS, open_request

pytestmark = pytest.mark.django_db


class WorkerKilled(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing in the task catches it."""


def _approved(acme, agent, approver):
    request = open_request(tenant=acme, agent=agent)
    decide_approval(approval=request, user=approver, decision="approve")  # resume not run: no on_commit here
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    return request


def test_crash_after_claim_before_execution_then_rerun_executes_once(acme, agent, approver, executions, monkeypatch):
    request = _approved(acme, agent, approver)
    import approvals.services as services

    real_arguments = services._arguments_for_execution

    def killed(approval):
        raise WorkerKilled()

    monkeypatch.setattr(services, "_arguments_for_execution", killed)
    with pytest.raises(WorkerKilled):
        resume_call.run(request.pk)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTING and request.completed_at is None and executions == []
    monkeypatch.setattr(services, "_arguments_for_execution", real_arguments)
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
    [effect] = worker_tools.executions()
    assert request.outcome["content"]["refund_id"] == effect["result"]["refund_id"]


def test_task_for_a_pending_request_does_nothing(acme, agent, executions):
    request = open_request(tenant=acme, agent=agent)
    resume_call.run(request.pk)
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.PENDING and executions == []


def _decide_and_resume(request, approver, errors: list) -> None:
    """The approver's decision; its commit runs the resume task here (eager Celery), as a worker would."""
    try:
        decide_approval(approval=request, user=approver, decision="approve")
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_overlapping_deliveries_reach_the_downstream_once(acme, agent, approver, executions):
    request = open_request(tenant=acme, agent=agent)
    in_flight = worker_tools.pause_next()
    errors: list = []
    first = threading.Thread(target=_decide_and_resume, args=(request, approver, errors))
    first.start()
    try:
        assert in_flight.arrived.wait(10), "the first delivery never reached the downstream"
        # The broker delivers the task again (visibility timeout) while the first is still executing. It may
        # end by asking to be retried later; what counts is what reached the downstream.
        with contextlib.suppress(Exception):
            resume_call.run(request.pk)
    finally:
        in_flight.release.set()
        first.join(30)
    assert not first.is_alive() and errors == []
    assert executions == [DEFAULT_ARGUMENTS]
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED and request.outcome["status"] == "ok"
    assert RunEvent.objects.filter(run=request.call.run, kind="call.completed").count() == 1
