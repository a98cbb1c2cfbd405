"""Every path that executes a call checks it again, live, just before acting (issue 12).

The attacker changes the world after the gate's decision and before the execution: an admin
revokes the agent or the grant, an owner retires the skill, the agent closes the run, or a
policy now denies the call. For each path (the gate's own write, an approved resume, an edited
approval, a client-executed result, a pipeline step, a long-running job's end) the downstream
must count no execution, the agent must get a typed result, and the refusal must be in the
audit trail (call row or approval log) and on a span.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.db import connections, transaction
from django.urls import reverse

from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus
from approvals.services import InvalidDecision, decide_approval
from console.services import revoke_agent
from policies.models import Grant
from policies.services import revoke_grant
from registry.models import Skill
from registry.services import retire_skill
from reliability.jobs import complete_job
from reliability.models import LongJob, PipelineStep
from reliability.sagas import submit_pipeline
from runs.adapters.python import register
from runs.client_exec import accept_client_result
from runs.gate import process_batch
from runs.models import CallStatus, IdempotencyRecord, Run, RunEvent, ToolCall
from runs.services import finish_run
from tests.reliability.conftest import flaky, publish, skill  # noqa: F401 - flaky is a fixture
from tests.runs.factories import make_skill, published_policy, rule, run_for
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

# The attack runs where a real one would land: between the decision and the execution.
_attack: list[Callable[[], None]] = []


@register("reauth.trigger", effect="read")
def _trigger(*, arguments, context):
    """An earlier write of the same batch or pipeline; meanwhile, the attacker acts."""
    try:
        while _attack:
            _attack.pop()()
    finally:
        connections.close_all()  # this runs on a gate thread
    return {"ok": True}


def _attacks(world) -> dict[str, Callable[[], None]]:
    def agent_revoked():
        revoke_agent(agent=type(world["agent"]).objects.get(pk=world["agent"].pk))

    def grant_revoked():
        for item in Grant.objects.filter(tenant=world["acme"]):
            revoke_grant(grant=item, revoked_by=None)

    def skill_retired():
        for item in Skill.objects.filter(namespace="billing"):
            retire_skill(skill=item, user=world["owner"])

    def run_closed():
        finish_run(run=Run.objects.get(pk=world["run"].pk), status="completed", reason="the agent is done")

    def policy_denies():
        published_policy(
            [rule("no-refunds", "deny", 'skill.name.startsWith("billing.")', "refunds are frozen")], name="freeze"
        )

    return {
        "agent_revoked": agent_revoked,
        "grant_revoked": grant_revoked,
        "skill_retired": skill_retired,
        "run_closed": run_closed,
        "policy_denies": policy_denies,
    }


LIVE_CODES = {
    "agent_revoked": ("authorization", "agent_revoked"),
    "grant_revoked": ("authorization", "grant_revoked"),
    "skill_retired": ("authorization", "skill_retired"),
    "run_closed": ("authorization", "run_closed"),
    "policy_denies": ("declined", "policy_changed"),
}
# A pipeline step is a new gate call: the gate's own front door refuses it, with its own codes.
FRONT_DOOR_CODES = {
    "agent_revoked": ("authorization", "agent_revoked"),
    "grant_revoked": ("authorization", "no_grant"),
    "skill_retired": ("not_found", "retired"),
    "run_closed": ("authorization", "run_closed"),
    "policy_denies": ("authorization", "denied_by_policy"),
}
CHECKS = list(LIVE_CODES)


@pytest.fixture
def world(acme, agent, owner, owner_team, flaky):  # noqa: F811 - the fixture imported above
    from tests.runs.factories import grant

    grant(acme, "billing.*")
    grant(acme, "ops.*")
    flaky.default("/refund", {"refund_id": "rf_1"})
    flaky.default("/export", ("status", 202, {}, {"job_id": "job-9", "status": "running"}))
    skill("ops.trigger", "python:reauth.trigger", effect="write")
    refund = skill("billing.refund", f"{flaky.url}/refund", effect="write")
    make_skill(
        "billing.approved_refund", effect="write", approval="required", adapter=f"{flaky.url}/refund", publish=False
    )
    skill("billing.local_refund", "client:refund", effect="write")
    skill("billing.export", f"{flaky.url}/export", effect="write", job_status=f"{flaky.url}/jobs/{{job_id}}")
    publish()
    _attack.clear()
    world = {"acme": acme, "agent": agent, "owner": owner, "flaky": flaky, "refund": refund}
    world["run"] = run_for(agent)
    return world


def _refund(call_id="r1", name="billing.refund", amount=500):
    return {"call_id": call_id, "name": name, "arguments": {"order_id": "o-1", "amount_cents": amount}}


def _assert_refused(world, call: ToolCall, result: dict, expected: tuple[str, str]) -> None:
    assert world["flaky"].hits["/refund"] == 0, "the downstream must count no execution"
    assert (result["error"]["class"], result["error"]["code"]) == expected, result
    call.refresh_from_db()
    assert call.status in (CallStatus.DENIED, CallStatus.DECLINED, CallStatus.INVALID)
    assert call.result["error"]["code"] == expected[1]
    spans = Span.objects.filter(call=call)
    assert spans.exists(), "the refusal is on the trace"


def _refusal_span(call: ToolCall, code: str) -> bool:
    return any(span.attributes.get("airlock.refused.code") == code for span in Span.objects.filter(call=call))


@pytest.mark.parametrize("check", CHECKS)
def test_direct_write_is_checked_again_after_an_earlier_write(world, check):
    _attack.append(_attacks(world)[check])
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=world["run"].pk)
    results = process_batch(run=run, calls=[{"call_id": "t1", "name": "ops.trigger", "arguments": {}}, _refund()])
    assert results[0]["status"] == "ok"
    call = ToolCall.objects.get(run=run, call_id="r1")
    _assert_refused(world, call, results[1], LIVE_CODES[check])
    assert call.decision["refused_at_execution"]["code"] == LIVE_CODES[check][1]  # the audit row
    assert _refusal_span(call, LIVE_CODES[check][1])


def test_a_policy_store_that_breaks_before_a_write_fails_it_closed(world):
    """The policy row is corrupted (written around the service layer, which would refuse it) between the
    decision and the write: the live check cannot compile the policy, and the write must not run. It fails
    with the generic internal error, nothing about the failure reaches the agent, and its key keeps that failure."""
    from policies.models import PolicyVersion

    published_policy([rule("ok", "allow")], name="store")

    def corrupt():
        PolicyVersion.objects.filter(policy__name="store").update(rules={"not": "a list of rules"})

    _attack.append(corrupt)
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=world["run"].pk)
    results = process_batch(
        run=run, calls=[{"call_id": "t1", "name": "ops.trigger", "arguments": {}}, _refund(amount=700)]
    )
    assert results[0]["status"] == "ok"
    result = results[1]
    assert result["error"]["class"] == "internal" and "rules" not in str(result) and "TypeError" not in str(result)
    assert world["flaky"].hits["/refund"] == 0, "the downstream must count no execution"
    assert ToolCall.objects.get(run=run, call_id="r1").status == CallStatus.FAILED
    [record] = IdempotencyRecord.objects.filter(call__call_id="r1")
    assert record.outcome["is_error"] and record.outcome["error"]["class"] == "internal"  # the failure, not a success


def _pending_approval(world) -> ApprovalRequest:
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=world["run"].pk)
    result = process_batch(run=run, calls=[_refund("a1", "billing.approved_refund")])[0]
    assert result["status"] == "approval_required", result
    return ApprovalRequest.objects.get(pk=result["approval_id"])


@pytest.mark.parametrize("edited", [False, True], ids=["approved", "edited"])
@pytest.mark.parametrize("check", CHECKS)
def test_approved_resume_is_checked_again(world, check, edited, approver):
    approval = _pending_approval(world)
    arguments = {"order_id": "o-1", "amount_cents": 400} if edited else None
    with transaction.atomic():  # the resume runs when this commits: after the attacker acted
        decide_approval(approval=approval, user=approver, decision="approve", arguments=arguments)
        _attacks(world)[check]()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED
    call = approval.call
    _assert_refused(world, call, approval.outcome, LIVE_CODES[check])
    audit = ApprovalEvent.objects.get(request=approval, to_status=ApprovalStatus.FAILED)
    assert audit.detail["error_code"] == LIVE_CODES[check][1]
    assert _refusal_span(call, LIVE_CODES[check][1])
    event = RunEvent.objects.get(run=call.run, kind="call.completed")
    assert event.payload["result"]["error"]["code"] == LIVE_CODES[check][1]


@pytest.mark.parametrize("check", CHECKS)
def test_client_result_is_checked_again(world, check):
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=world["run"].pk)
    issued = process_batch(run=run, calls=[_refund("l1", "billing.local_refund")])[0]
    assert issued["status"] == "execute_locally", issued
    _attacks(world)[check]()
    call = ToolCall.objects.get(run=run, call_id="l1")
    result = accept_client_result(call=call, token=issued["token"], content={"refund_id": "rf_local"})
    _assert_refused(world, call, result, LIVE_CODES[check])
    assert call.decision["refused_at_execution"]["code"] == LIVE_CODES[check][1]
    assert _refusal_span(call, LIVE_CODES[check][1])
    assert not RunEvent.objects.filter(run=run, kind="call.completed", payload__result__status="ok").exists()


@pytest.mark.parametrize("check", CHECKS)
def test_pipeline_step_is_checked_again(world, check):
    _attack.append(_attacks(world)[check])
    run = Run.objects.get(pk=world["run"].pk)
    submit_pipeline(
        run=run,
        pipeline_id="p1",
        steps=[
            {"step_id": "s1", "name": "ops.trigger", "arguments": {}},
            {"step_id": "s2", "name": "billing.refund", "arguments": {"order_id": "o-1", "amount_cents": 500}},
        ],
    )
    assert world["flaky"].hits["/refund"] == 0, "the downstream must count no execution"
    receipt = PipelineStep.objects.get(pipeline__run=run, step_id="s2").receipt
    assert (receipt["error"]["class"], receipt["error"]["code"]) == FRONT_DOOR_CODES[check]
    call = ToolCall.objects.filter(run=run, call_id="p1:s2").first()
    if check in ("agent_revoked", "run_closed"):  # refused before the step became a call of the run
        assert call is None
        return
    assert call.status in (CallStatus.DENIED, CallStatus.INVALID)
    assert call.result["error"]["code"] == FRONT_DOOR_CODES[check][1]
    assert Span.objects.filter(call=call, error_class=FRONT_DOOR_CODES[check][0]).exists()


@pytest.mark.parametrize("check", CHECKS)
def test_job_end_is_checked_again(world, check):
    run = Run.objects.select_related("tenant", "agent", "snapshot").get(pk=world["run"].pk)
    accepted = process_batch(run=run, calls=[{"call_id": "j1", "name": "billing.export", "arguments": {}}])[0]
    assert accepted["status"] == "ok" and accepted["content"]["job"]["id"] == "job-9"
    job = LongJob.objects.get(run=run)
    _attacks(world)[check]()
    complete_job(job=job, succeeded=True, content={"rows": 3})  # the tool's callback arrives
    call = ToolCall.objects.get(run=run, call_id="j1")
    expected = LIVE_CODES[check]
    if check == "policy_denies":  # a job's end delivers what already ran: no policy on its arguments
        assert call.status == CallStatus.SUCCEEDED and call.result["content"] == {"rows": 3}
        return
    assert world["flaky"].hits["/jobs/job-9"] == 0  # nothing more is asked of the downstream
    assert call.status == CallStatus.DENIED
    assert (call.result["error"]["class"], call.result["error"]["code"]) == expected
    assert "rows" not in str(RunEvent.objects.filter(run=run).values_list("payload", flat=True))
    assert Span.objects.filter(call=call).exists()


def test_an_edit_the_policy_would_deny_is_refused_in_the_inbox_with_the_rule_reason(world, approver, client):
    published_policy(
        [rule("cap", "deny", "args.amount_cents > 10000", "refunds above $100 need finance")], name="refund cap"
    )
    approval = _pending_approval(world)  # 500 cents: the cap does not match, the skill needs approval
    client.force_login(approver)
    response = client.post(
        reverse("approvals:decide", args=[approval.pk]),
        {"decision": "approve", "arguments": json.dumps({"order_id": "o-1", "amount_cents": 50000})},
    )
    assert response.status_code == 400
    assert "refunds above $100 need finance" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING and world["flaky"].hits["/refund"] == 0
    with pytest.raises(InvalidDecision, match="refunds above"):  # the API and console share the service
        decide_approval(
            approval=approval, user=approver, decision="approve", arguments={"order_id": "o-1", "amount_cents": 50000}
        )
    decide_approval(
        approval=approval, user=approver, decision="approve", arguments={"order_id": "o-1", "amount_cents": 9000}
    )  # an edit within the rule is fine
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and world["flaky"].hits["/refund"] == 1
