import pytest
from django.core.exceptions import PermissionDenied

from approvals.models import ApprovalStatus
from approvals.presentation import shown_arguments
from approvals.services import AlreadyDecided, DecisionRefused, InvalidDecision, decide_approval
from lib.canonical import sha256_of
from runs.models import CallStatus, RunEvent
from tests.approvals.factories import make_run, make_skill_version, open_request

pytestmark = pytest.mark.django_db


def _decide(approval, user, decision="approve", **kwargs):
    return decide_approval(approval=approval, user=user, decision=decision, **kwargs)


def test_approve_executes_the_call_and_records_the_outcome(
    acme, agent, approver, executions, django_capture_on_commit_callbacks
):
    request = open_request(tenant=acme, agent=agent)
    with django_capture_on_commit_callbacks(execute=True):
        _decide(request, approver)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED
    assert request.decided_by == approver and request.outcome["status"] == "ok"
    assert len(executions) == 1 and executions[0]["card_token"] == "tok_live_secret"
    assert [e.action for e in request.events.all()] == ["requested", "approved", "executing", "executed"]
    kinds = list(RunEvent.objects.filter(run=request.call.run).values_list("kind", flat=True))
    assert kinds == ["approval.requested", "approval.decided", "call.completed", "run.status"]


def test_double_click_gets_already_decided_and_changes_nothing(
    acme, agent, approver, executions, django_capture_on_commit_callbacks
):
    request = open_request(tenant=acme, agent=agent)
    with django_capture_on_commit_callbacks(execute=True):
        _decide(request, approver)
    with pytest.raises(AlreadyDecided) as excinfo:
        _decide(request, approver)
    assert "by approver at" in str(excinfo.value)
    with pytest.raises(AlreadyDecided):
        _decide(request, approver, "decline", reason="changed my mind")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED and len(executions) == 1
    assert request.events.filter(action="declined").count() == 0


def test_second_approver_loses_to_the_first(acme, agent, approver, second_approver, executions):
    request = open_request(tenant=acme, agent=agent)
    _decide(request, approver, "decline", reason="wrong customer")
    with pytest.raises(AlreadyDecided) as excinfo:
        _decide(request, second_approver)
    assert str(excinfo.value).startswith("already declined by approver at ")


def test_decline_needs_a_reason_and_tells_the_agent_not_to_retry(
    acme, agent, approver, executions, django_capture_on_commit_callbacks
):
    request = open_request(tenant=acme, agent=agent)
    with pytest.raises(InvalidDecision):
        _decide(request, approver, "decline", reason="   ")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    with django_capture_on_commit_callbacks(execute=True):
        _decide(request, approver, "decline", reason="customer already refunded")
    request.refresh_from_db()
    call = request.call
    call.refresh_from_db()
    assert request.status == ApprovalStatus.DECLINED and executions == []
    assert call.status == CallStatus.DECLINED and call.result["error"]["class"] == "declined"
    assert "customer already refunded" in call.result["error"]["message"]
    assert "Do not retry" in request.outcome["error"]["message"]


def test_approver_cannot_approve_a_run_on_their_own_behalf(acme, agent, approver, second_approver, executions):
    request = open_request(tenant=acme, agent=agent, end_user="approver@example.com")
    with pytest.raises(DecisionRefused):
        _decide(request, approver)
    assert _decide(request, second_approver).status == ApprovalStatus.APPROVED


def test_viewer_and_outsider_cannot_decide(acme, agent, viewer, outsider):
    request = open_request(tenant=acme, agent=agent)
    for person in (viewer, outsider):
        with pytest.raises(PermissionDenied):
            _decide(request, person)


def test_two_person_needs_two_distinct_approvers(
    acme, agent, approver, second_approver, executions, django_capture_on_commit_callbacks
):
    version = make_skill_version(name="iam.revoke_access", approval="two_person")
    request = open_request(tenant=acme, agent=agent, skill_version=version)
    with django_capture_on_commit_callbacks(execute=True):
        assert _decide(request, approver).status == ApprovalStatus.PENDING
    with pytest.raises(DecisionRefused, match="second, different approver"):
        _decide(request, approver)
    assert executions == []
    with django_capture_on_commit_callbacks(execute=True):
        _decide(request, second_approver)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXECUTED and len(executions) == 1
    approved = request.events.get(action="approved")
    assert approved.detail["approvers"] == ["approver", "approver2"]


def test_edited_arguments_are_revalidated_and_diffed(
    acme, agent, approver, executions, django_capture_on_commit_callbacks
):
    request = open_request(tenant=acme, agent=agent)
    shown = shown_arguments(request, approver)  # what the approver's edit box holds
    with pytest.raises(InvalidDecision) as excinfo:
        _decide(request, approver, arguments={**shown, "amount_cents": "a lot"})
    assert excinfo.value.fields[0]["path"] == "/amount_cents"
    with pytest.raises(InvalidDecision):
        _decide(request, approver, arguments={**shown, "unexpected": 1})
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    with django_capture_on_commit_callbacks(execute=True):
        _decide(request, approver, arguments={**shown, "amount_cents": 500})
    request.refresh_from_db()
    # the masked card token kept its hidden value; only the amount changed
    assert executions == [
        {"customer_id": "c-42", "amount_cents": 500, "card_token": "tok_live_secret", "note": "duplicate"}
    ]
    # the approved edit is bound by its hash to what ran; its sealed copy is dropped once the call has run
    assert request.edited_arguments_sha256 == sha256_of(executions[0]) and request.sealed_edited_arguments == ""
    changes = request.events.get(action="approved").detail["changes"]
    assert changes == [{"path": "/amount_cents", "op": "replace", "from": 1250, "to": 500}]


def test_several_requests_in_one_run_are_decided_in_any_order(
    acme, agent, approver, executions, django_capture_on_commit_callbacks
):
    run = make_run(tenant=acme, agent=agent)
    first = open_request(tenant=acme, agent=agent, run=run, call_id="a")
    second = open_request(tenant=acme, agent=agent, run=run, call_id="b")
    assert first.pk != second.pk
    with django_capture_on_commit_callbacks(execute=True):
        _decide(second, approver)
    run.refresh_from_db()
    assert run.status == "paused"
    with django_capture_on_commit_callbacks(execute=True):
        _decide(first, approver, "decline", reason="not this one")
    run.refresh_from_db()
    assert run.status == "running"
