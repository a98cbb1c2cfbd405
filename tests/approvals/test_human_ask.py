"""`human.ask`: an agent asks a person, through the real gate, the inbox's decision and the worker's resume.

Written as the people who would abuse it: an agent answering its own question or smuggling an answer in, an
approver of another tenant, a viewer, the end user the run acts for, a team publishing its own `human.ask`,
a tenant's policy that forbids asking, an answer outside the choices, an approve of a question.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import AlreadyDecided, DecisionRefused, InvalidDecision, decide_approval
from console.models import Role, Team
from registry import namespaces
from runs.models import CallStatus, ToolCall
from tests.approvals.gate_world import build_refund_world
from tests.conftest import make_user
from tests.runs.conftest import post_calls, start_run
from tests.runs.factories import published_policy, rule
from traces.models import Span

pytestmark = pytest.mark.django_db
QUESTION = "Ada asks for a refund of EUR 129 on a damaged order. Refund in full or half?"


@pytest.fixture
def world(acme):
    return build_refund_world(acme)


def _ask(agent_client, run_id: str, call_id: str = "q1", **arguments) -> dict:
    body = {"question": QUESTION, "choices": ["full", "half"], **arguments}
    response = post_calls(agent_client, run_id, [{"call_id": call_id, "name": "human.ask", "arguments": body}])
    assert response.status_code == 200, response.content
    return response.json()["results"][0]


def _completed(agent_client, run_id: str) -> dict:
    feed = agent_client.get(reverse("runs_api:run_events", args=[run_id]), {"after": 0}).json()
    return {e["payload"]["call_id"]: e["payload"]["result"] for e in feed["events"] if e["kind"] == "call.completed"}


def test_the_answer_reaches_the_agent_as_the_result_once(
    agent_client, world, approver, django_capture_on_commit_callbacks
):
    run = start_run(agent_client)
    asked = _ask(agent_client, run["run_id"])
    assert asked["status"] == "approval_required"
    approval = ApprovalRequest.objects.get(pk=asked["approval_id"])
    assert approval.skill_name == "human.ask" and approval.status == ApprovalStatus.PENDING

    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=approval, user=approver, decision="answer", answer="half")

    result = _completed(agent_client, run["run_id"])["q1"]
    assert result["status"] == "ok" and result["content"] == {"answer": "half"}, result
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.answer == "half"
    assert ToolCall.objects.get(call_id="q1").status == CallStatus.SUCCEEDED
    spans = set(Span.objects.filter(trace__run_id=run["run_id"]).values_list("kind", "name"))
    assert {("approval_request", "approval.requested"), ("approval_decision", "approval.approved")} <= spans
    with pytest.raises(AlreadyDecided):  # the first decision wins: a second answer is refused, nothing changes
        decide_approval(approval=approval, user=approver, decision="answer", answer="full")
    approval.refresh_from_db()
    assert approval.answer == "half"


def test_a_free_answer_when_no_choices_and_a_pasted_secret_is_masked(
    agent_client, world, approver, django_capture_on_commit_callbacks
):
    run = start_run(agent_client)
    post_calls(
        agent_client,
        run["run_id"],
        [{"call_id": "q1", "name": "human.ask", "arguments": {"question": "Which carrier for Ada's parcel?"}}],
    )
    approval = ApprovalRequest.objects.get(skill_name="human.ask")
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(
            approval=approval, user=approver, decision="answer", answer="DHL; key sk_live_abcdefghijklmnopqrstuvwx"
        )
    content = _completed(agent_client, run["run_id"])["q1"]["content"]
    assert content["answer"].startswith("DHL") and "sk_live_abcdefghijklmnopqrstuvwx" not in content["answer"]


def test_an_answer_outside_the_choices_or_an_approve_is_refused_and_nothing_is_decided(agent_client, world, approver):
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"])["approval_id"])
    for decision, answer in (("answer", "a quarter"), ("answer", "   "), ("approve", "")):
        with pytest.raises(InvalidDecision):
            decide_approval(approval=approval, user=approver, decision=decision, answer=answer)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING and approval.answer == ""


def test_a_normal_request_cannot_be_answered_instead_of_approved(agent_client, world, approver):
    run = start_run(agent_client)
    refund = {"customer_id": "c-42", "amount_cents": 100}
    result = post_calls(
        agent_client, run["run_id"], [{"call_id": "r1", "name": "billing.create_refund", "arguments": refund}]
    ).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    with pytest.raises(InvalidDecision):
        decide_approval(approval=approval, user=approver, decision="answer", answer="yes")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_an_answer_the_agent_sends_itself_is_replaced_by_the_persons(
    agent_client, world, approver, django_capture_on_commit_callbacks
):
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"], answer="full")["approval_id"])
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval=approval, user=approver, decision="answer", answer="half")
    assert _completed(agent_client, run["run_id"])["q1"]["content"] == {"answer": "half"}


def test_the_end_user_the_run_acts_for_cannot_answer(acme, agent_client, world):
    alice = make_user("u-1", tenant=acme, roles=[Role.APPROVER])  # start_run acts for end user "u-1"
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"])["approval_id"])
    with pytest.raises(DecisionRefused):
        decide_approval(approval=approval, user=alice, decision="answer", answer="full")


def test_another_tenants_approver_and_a_viewer_cannot_answer_over_http(
    acme, globex, agent_client, world, viewer, client
):
    outsider = make_user("gina", tenant=globex, roles=[Role.APPROVER, Role.VIEWER])
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"])["approval_id"])
    url = reverse("approvals:decide", args=[approval.pk])
    client.force_login(outsider)
    assert client.post(url, {"decision": "answer", "answer": "full"}).status_code == 404
    client.force_login(viewer)
    assert client.post(url, {"decision": "answer", "answer": "full"}).status_code == 403
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_the_console_answers_by_choice(agent_client, world, approver, client, django_capture_on_commit_callbacks):
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"])["approval_id"])
    client.force_login(approver)
    card = client.get(reverse("approvals:inbox")).content.decode()
    assert QUESTION in card and 'value="full"' in card and 'value="half"' in card
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("approvals:decide", args=[approval.pk]),
            {"decision": "answer", "answer": "full"},
            HTTP_HX_REQUEST="true",
        )
    assert response.status_code == 200
    assert _completed(agent_client, run["run_id"])["q1"]["content"]["answer"] == "full"


def test_a_tenant_policy_can_forbid_asking(agent_client, world):
    published_policy([rule("no-asking", "deny", 'skill.name == "human.ask"', reason="Ask in the team channel.")])
    run = start_run(agent_client)
    result = _ask(agent_client, run["run_id"])
    assert result["error"]["code"] == "denied_by_policy"
    assert not ApprovalRequest.objects.filter(skill_name="human.ask").exists()


def test_no_team_may_publish_or_claim_the_human_namespace(db):
    team = Team.objects.create(slug="support-tools", name="Support tools")
    owner = make_user("olivia")
    team.members.add(owner)
    with pytest.raises(namespaces.ClaimRefused):
        namespaces.request_namespace(namespace="human", team=team, user=owner)
    assert namespaces.namespace_problems("human.ask", "support-tools")[0]["code"] == "namespace_reserved"
    assert namespaces.namespace_problems("human.tools.ask", "support-tools")
    assert namespaces.namespace_problems("humane.ask", "support-tools") == []


def test_two_questions_of_one_agent_are_never_grouped_for_one_answer(agent_client, world, approver, client):
    run = start_run(agent_client)
    _ask(agent_client, run["run_id"], "q1")
    _ask(agent_client, run["run_id"], "q2", question="Ship by air or by sea?", choices=["air", "sea"])
    client.force_login(approver)
    page = client.get(reverse("approvals:inbox")).content.decode()
    assert "approval-group" not in page and page.count('data-action="answer"') == 4


def _feed(agent_client, run_id: str) -> list[dict]:
    return agent_client.get(reverse("runs_api:run_events", args=[run_id]), {"after": 0}).json()["events"]


def test_an_approver_asks_the_agent_back_and_it_reaches_the_runs_feed_trace_and_audit(
    agent_client, world, approver, client
):
    run = start_run(agent_client)
    refund = {"customer_id": "c-42", "amount_cents": 100}
    result = post_calls(
        agent_client, run["run_id"], [{"call_id": "r1", "name": "billing.create_refund", "arguments": refund}]
    ).json()["results"][0]
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    client.force_login(approver)
    url = reverse("approvals:ask_agent", args=[approval.pk])
    response = client.post(url, {"question": "Was the order delivered? Token tok_live_secret1234567890"})
    assert response.status_code == 302
    asked = [e for e in _feed(agent_client, run["run_id"]) if e["kind"] == "approval.question"]
    assert len(asked) == 1 and asked[0]["payload"]["call_id"] == "r1" and asked[0]["payload"]["asked_by"] == "approver"
    assert asked[0]["payload"]["question"].startswith("Was the order delivered?")
    span = Span.objects.get(trace__run_id=run["run_id"], name="approval.question")
    assert span.attributes["asked_by"] == "approver"
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    page = client.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert "asked the agent: Was the order delivered?" in page
    assert client.post(url, {"question": "  "}).status_code == 400


def test_a_viewer_another_tenant_and_a_decided_request_cannot_ask_the_agent(
    globex, agent_client, world, approver, viewer, client
):
    outsider = make_user("gina", tenant=globex, roles=[Role.APPROVER, Role.VIEWER])
    run = start_run(agent_client)
    approval = ApprovalRequest.objects.get(pk=_ask(agent_client, run["run_id"])["approval_id"])
    url = reverse("approvals:ask_agent", args=[approval.pk])
    client.force_login(outsider)
    assert client.post(url, {"question": "hello?"}).status_code == 404
    client.force_login(viewer)
    assert client.post(url, {"question": "hello?"}).status_code == 403
    decide_approval(approval=approval, user=approver, decision="decline", reason="Not for us to say.")
    client.force_login(approver)
    assert client.post(url, {"question": "hello?"}).status_code == 409
    assert not [e for e in _feed(agent_client, run["run_id"]) if e["kind"] == "approval.question"]
