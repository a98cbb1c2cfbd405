"""Through the real gate: confirm → approval → decision → resume → long poll and webhook."""

import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.presentation import shown_arguments
from approvals.services import decide_approval, resume_approval
from runs.models import CallStatus, Run, RunEvent, ToolCall
from tests.approvals import worker_tools
from tests.approvals.gate_world import build_refund_world
from tests.approvals.receiver import Receiver
from tests.runs.conftest import post_calls, start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(acme):
    return build_refund_world(acme)


def _refund(call_id: str, amount: int = 1250) -> dict:
    return {
        "call_id": call_id,
        "name": "billing.create_refund",
        "arguments": {"customer_id": "c-42", "amount_cents": amount, "card_token": "tok_live_secret"},
    }


def _events(agent_client, run_id: str, after: int = 0, wait: float = 0) -> dict:
    response = agent_client.get(reverse("runs_api:run_events", args=[run_id]), {"after": after, "wait": wait})
    assert response.status_code == 200, response.content
    return response.json()


def test_batch_of_confirms_decided_in_any_order_reaches_the_agent(
    agent_client, world, approver, settings, executions, django_capture_on_commit_callbacks
):
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = True
    receiver = Receiver().start()
    try:
        run = start_run(agent_client, callback_url=receiver.url)
        with django_capture_on_commit_callbacks(execute=True):
            response = post_calls(agent_client, run["run_id"], [_refund("a", 100), _refund("b", 200)])
        results = response.json()["results"]
        assert [r["status"] for r in results] == ["approval_required", "approval_required"]
        first, second = (ApprovalRequest.objects.get(pk=r["approval_id"]) for r in results)
        assert first.pk != second.pk and first.policy_version == second.policy_version
        feed = _events(agent_client, run["run_id"])
        assert [e["kind"] for e in feed["events"]] == ["approval.requested", "approval.requested"]
        cursor = feed["next_cursor"]

        with django_capture_on_commit_callbacks(execute=True):
            decide_approval(approval=second, user=approver, decision="approve")
        with django_capture_on_commit_callbacks(execute=True):
            decide_approval(approval=first, user=approver, decision="decline", reason="duplicate request")

        feed = _events(agent_client, run["run_id"], after=cursor)
        completed = {
            e["payload"]["call_id"]: e["payload"]["result"] for e in feed["events"] if e["kind"] == "call.completed"
        }
        assert completed["b"]["status"] == "ok" and completed["b"]["content"]["amount_cents"] == 200
        assert (
            completed["a"]["error"]["class"] == "declined" and "duplicate request" in completed["a"]["error"]["message"]
        )
        assert feed["run_status"] == "running"
        assert [e["amount_cents"] for e in (x["result"] for x in worker_tools.executions())] == [200]
        assert [arguments["amount_cents"] for arguments in executions] == [200]
        assert {ToolCall.objects.get(call_id=c).status for c in "ab"} == {CallStatus.SUCCEEDED, CallStatus.DECLINED}
        delivered = [json.loads(r.body)["kind"] for r in receiver.requests]
        assert delivered.count("call.completed") == 2 and delivered.count("approval.requested") == 2
    finally:
        receiver.stop()


def test_edited_arguments_run_through_the_gate(
    agent_client, world, approver, executions, django_capture_on_commit_callbacks
):
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [_refund("a", 5000)]).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(
            approval=approval,
            user=approver,
            decision="approve",
            arguments={**shown_arguments(approval, approver), "amount_cents": 2500},
        )
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.outcome["content"]["amount_cents"] == 2500
    assert worker_tools.executions()[0]["result"]["amount_cents"] == 2500
    assert executions == [{"customer_id": "c-42", "amount_cents": 2500, "card_token": "tok_live_secret"}]
    from traces.models import Span

    kinds = set(Span.objects.filter(trace__run_id=run["run_id"]).values_list("kind", "name"))
    assert {
        ("approval_request", "approval.requested"),
        ("approval_decision", "approval.approved"),
        ("approval", "approval.resumed"),
    } <= kinds


class WorkerKilled(BaseException):
    """Stands for SIGKILL between the downstream effect and Airlock recording it."""


def test_worker_killed_after_execution_rerun_executes_once_and_keeps_outcome(
    agent_client, world, approver, executions, monkeypatch
):
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [_refund("a")]).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    decide_approval(approval=approval, user=approver, decision="approve")  # resume not yet run
    import approvals.services as services

    real_complete = services._complete

    def killed(*args, **kwargs):
        raise WorkerKilled()

    monkeypatch.setattr(services, "_complete", killed)
    with pytest.raises(WorkerKilled):
        resume_approval(approval_id=approval.pk)
    assert len(worker_tools.executions()) == 1 and len(executions) == 1
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.EXECUTING
    monkeypatch.setattr(services, "_complete", real_complete)
    resume_approval(approval_id=approval.pk)  # the re-delivered task
    resume_approval(approval_id=approval.pk)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.outcome["status"] == "ok"
    assert len(worker_tools.executions()) == 1 and len(executions) == 1
    assert RunEvent.objects.filter(run_id=run["run_id"], kind="call.completed").count() == 1
    assert Run.objects.get(pk=run["run_id"]).status == "running"


def test_two_person_through_the_gate(
    agent_client, world, approver, second_approver, executions, django_capture_on_commit_callbacks
):
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [{**_refund("a"), "name": "iam.revoke_access"}]).json()
    approval = ApprovalRequest.objects.get(pk=result["results"][0]["approval_id"])
    assert approval.required_approvals == 2
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=approval, user=approver, decision="approve")
    assert worker_tools.executions() == [] and executions == []
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=approval, user=second_approver, decision="approve")
    assert len(worker_tools.executions()) == 1 and len(executions) == 1
