"""End to end through approvals: confirm → approve → the resume task executes once through the gate."""

import pytest

from approvals.models import ApprovalRequest
from approvals.services import decide_approval
from runs import demo_tools
from runs.models import CallStatus, Run, RunEvent, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db(transaction=True)


def test_approved_call_executes_once_and_run_resumes(agent_client, acme, approver):
    make_skill("support.send_email", effect="external", adapter="python:demo.send_email")
    grant(acme, "support.*")
    run = start_run(agent_client)
    arguments = {"to": "ada@example.org", "subject": "Refund", "body_text": "On its way."}
    result = post_calls(agent_client, run["run_id"], [call("c1", "support.send_email", arguments)]).json()
    approval = ApprovalRequest.objects.get(pk=result["results"][0]["approval_id"])
    assert Run.objects.get(pk=run["run_id"]).status == "paused"

    decide_approval(approval=approval, user=approver, decision="approve")  # eager Celery runs the resume task

    stored = ToolCall.objects.get(call_id="c1")
    assert stored.status == CallStatus.SUCCEEDED and stored.sealed_arguments == ""
    assert [m["to"] for m in demo_tools.outbox()] == ["ada@example.org"]
    assert Run.objects.get(pk=run["run_id"]).status == "running"
    completed = RunEvent.objects.get(run_id=run["run_id"], kind="call.completed")
    assert completed.payload["result"]["content"]["message_id"] == "msg_0001"
    from approvals.services import resume_approval

    resume_approval(approval_id=approval.pk)  # a re-delivered task does nothing more
    assert len(demo_tools.outbox()) == 1


def test_client_executed_skill_gets_a_local_execution_token(agent_client, acme):
    make_skill("local.summarise", adapter="client:summarise")
    grant(acme, "local.*")
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "local.summarise", {"text": "x"})]).json()
    assert result["results"][0]["status"] == "execute_locally" and result["results"][0]["token"]
    assert ToolCall.objects.get(call_id="c1").status == CallStatus.EXECUTING
