"""The why panel answers all eight questions of the runtime design from what was recorded with the call:
a denied, a validation-failed and an approved (and executed) call, driven through the real API, gate and
approvals. Grants changed afterwards do not change the "tools exposed" answer; another tenant gets 404."""

import json

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services import decide_approval
from policies.models import Grant
from runs.adapters.python import register
from runs.models import ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span, Trace
from traces.why import explain_call

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id"],
    "properties": {"order_id": {"type": "string", "pattern": "^ord_"}, "amount": {"type": "number"}},
}
EXPOSED = ["orders.lookup", "orders.refund", "orders.delete", "web.search"]


@register("why_test.order", effect="read")
def order(*, arguments, context):
    return {"order_id": arguments["order_id"], "lines": [{"sku": f"sku-{i}", "note": "x" * 40} for i in range(60)]}


@pytest.fixture
def catalog(acme):
    make_skill("orders.lookup", adapter="python:why_test.order", schema=SCHEMA, publish=False, result_limit_bytes=1024)
    make_skill(
        "orders.refund",
        effect="write",
        adapter="python:why_test.order",
        schema=SCHEMA,
        approval="required",
        result_limit_bytes=1024,
        publish=False,
    )
    make_skill("orders.delete", effect="write", adapter="python:why_test.order", schema=SCHEMA, publish=False)
    grant(acme, "orders.*")
    published_policy(
        [rule("no-deletes", "deny", "skill.name == 'orders.delete'", reason="Deleting orders is not allowed.")],
        scope="tenant",
        tenant=acme,
        name="order rules",
    )
    make_skill("orders.publisher", adapter="python:why_test.order")  # publishes the snapshot


@pytest.fixture
def batch(agent_client, approver, catalog, django_capture_on_commit_callbacks):
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(
            reverse("runs_api:run_calls", args=[run["run_id"]]),
            {
                "exposed_tools": EXPOSED,
                "calls": [
                    call("c-lookup", "orders.lookup", {"order_id": "ord_1"}, taint="read a customer email"),
                    call("c-delete", "orders.delete", {"order_id": "ord_1"}),
                    call("c-invalid", "orders.lookup", {"order_id": "nope", "amount": "ten"}),
                    call("c-refund", "orders.refund", {"order_id": "ord_1", "amount": 5}),
                ],
            },
            format="json",
        )
    assert response.status_code == 200, response.content
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == ["ok", "error", "error", "approval_required"]
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(
            approval=ApprovalRequest.objects.get(), user=approver, decision="approve", arguments={"order_id": "ord_2"}
        )
    return Trace.objects.get(run_id=run["run_id"])


def answers(trace: Trace, call_id: str) -> list:
    tool_call = ToolCall.objects.get(run=trace.run, call_id=call_id)
    return explain_call(call=tool_call, spans=list(Span.objects.filter(call=tool_call)))


def text(answer) -> str:
    return answer.answer + " " + " ".join(f"{k}={v}" for k, v in answer.details)


def test_a_denied_call_answers_all_eight_from_its_record(batch):
    exposed, validation, policy, taint, approval, attempts, shaping, outcome = answers(batch, "c-delete")
    assert exposed.answer == "4 tools; orders.delete was among them"
    assert "reported by the agent's framework" in text(exposed) and "web.search" in text(exposed)
    assert validation.answer == "orders.delete@1.0.0: the arguments matched its schema."
    assert policy.answer == "deny" and "no-deletes" in text(policy)
    assert dict(policy.details)["policy version"].endswith("@v1")  # the published version that decided
    assert taint.answer == "Tainted: read a customer email"
    assert approval.answer == "No approval was needed."
    assert attempts.answer == "Nothing ran."
    assert shaping.answer == "No result was shaped."
    assert outcome.answer == "denied: denied_by_policy" and "Deleting orders is not allowed." in text(outcome)


def test_a_validation_failed_call_names_its_fields(batch):
    exposed, validation, policy, taint, approval, attempts, shaping, outcome = answers(batch, "c-invalid")
    assert exposed.status == "ok"
    assert validation.status == "bad" and dict(validation.details)["skill"] == "orders.lookup@1.0.0"
    fields = {k: v for k, v in validation.details if k.startswith("field ")}
    assert set(fields) == {"field order_id", "field amount"}, validation.details
    assert policy.answer == "Not reached."
    assert taint.answer.startswith("Tainted")  # the first call of the batch tainted the run before this one
    assert attempts.answer == "Nothing ran." and shaping.answer == "No result was shaped."
    assert outcome.answer.startswith("invalid")


def test_an_approved_call_says_who_when_edited_attempts_and_shaping(batch, approver):
    exposed, validation, policy, taint, approval, attempts, shaping, outcome = answers(batch, "c-refund")
    assert exposed.answer == "4 tools; orders.refund was among them"
    assert policy.answer == "confirm"
    assert approval.answer == "Approval required; approved."
    recorded = dict(approval.details)
    assert recorded["decided by"] == approver.username and recorded["arguments edited"] == "yes"
    assert recorded["decided at"] and approval.approval_id
    assert attempts.answer == "1 attempt(s); no failure."
    assert "cut" in shaping.answer and "1024 bytes" in shaping.answer
    assert int(dict(shaping.details)["bytes from the tool"]) > 1024 >= int(dict(shaping.details)["bytes to the model"])
    assert outcome.answer == "succeeded: the model got the result."


def test_changing_grants_afterwards_does_not_change_the_exposed_answer(batch, acme):
    before = answers(batch, "c-lookup")[0]
    Grant.objects.filter(tenant=acme).delete()
    grant(acme, "nothing.*")
    after = answers(batch, "c-lookup")[0]
    assert (after.answer, after.details) == (before.answer, before.details)


def test_without_exposed_tools_the_gate_records_the_callable_set(agent_client, acme, catalog):
    run = start_run(agent_client)
    post_calls(agent_client, run["run_id"], [call("c1", "orders.delete", {"order_id": "ord_1"})])
    stored = ToolCall.objects.get(call_id="c1")
    assert stored.decision["exposed_tools"] == {
        "names": ["orders.delete", "orders.lookup", "orders.publisher", "orders.refund"],
        "source": "gate",
    }
    Grant.objects.filter(tenant=acme).delete()  # the grants go: what was recorded stays
    exposed = explain_call(call=ToolCall.objects.get(call_id="c1"), spans=[])[0]
    assert exposed.answer == "4 tools; orders.delete was among them"
    assert dict(exposed.details)["source"] == "the callable set at the time, not reported by the agent"


@pytest.mark.parametrize(
    ("exposed", "field_message"),
    [
        ("orders.lookup", "Expected a list"),
        ([1, 2], "Not a valid string"),
        (["x" * 201], "no more than 200"),
        ([f"t{i}" for i in range(201)], "no more than 200"),
        (["ok", ""], "may not be blank"),
        (["bad\ud800"], "lone UTF-16 surrogate"),
        (["nul\x00"], "a NUL character"),
    ],
)
def test_malformed_exposed_tools_refuse_the_batch_and_record_nothing(agent_client, catalog, exposed, field_message):
    run = start_run(agent_client)
    response = agent_client.post(
        reverse("runs_api:run_calls", args=[run["run_id"]]),
        json.dumps({"exposed_tools": exposed, "calls": [call("c1", "orders.lookup", {"order_id": "ord_1"})]}),
        content_type="application/json",  # a lone surrogate travels as the escape \ud800, as a client would send it
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["class"] == "validation" and "exposed_tools" in error["fields"]
    assert field_message in str(error["fields"]["exposed_tools"])
    assert not ToolCall.objects.filter(run_id=run["run_id"]).exists()
    assert not Span.objects.filter(trace__run_id=run["run_id"]).exists()


def test_another_tenant_gets_404_for_the_why_panel(batch, client, outsider, approver):
    tool_call = ToolCall.objects.get(run=batch.run, call_id="c-refund")
    url = reverse("traces:why", args=[batch.pk, tool_call.pk])
    login(client, outsider)
    assert client.get(url).status_code == 404
    login(client, approver)
    page = client.get(url).content.decode()
    assert "Which tools were exposed to the model at that turn?" in page and "web.search" in page
    assert page.count('<div class="q">') == 8


def test_the_cached_callable_set_follows_a_grant_change(agent_client, acme, catalog):
    run = start_run(agent_client)
    post_calls(agent_client, run["run_id"], [call("c1", "orders.lookup", {"order_id": "ord_1"})])
    Grant.objects.filter(tenant=acme).delete()
    grant(acme, "orders.lookup")
    post_calls(agent_client, run["run_id"], [call("c2", "orders.lookup", {"order_id": "ord_1"})])
    recorded = {c.call_id: c.decision["exposed_tools"]["names"] for c in ToolCall.objects.filter(run_id=run["run_id"])}
    assert len(recorded["c1"]) == 4 and recorded["c2"] == ["orders.lookup"]


def test_reported_tool_names_are_shown_escaped_and_a_long_list_is_counted(agent_client, catalog, client, approver):
    run = start_run(agent_client)
    hostile = ["<img src=x onerror=alert(1)>"] + [f"tool.n{i}" for i in range(150)] + ["orders.lookup"]
    agent_client.post(
        reverse("runs_api:run_calls", args=[run["run_id"]]),
        {"exposed_tools": hostile, "calls": [call("c1", "orders.lookup", {"order_id": "ord_1"})]},
        format="json",
    )
    tool_call = ToolCall.objects.get(call_id="c1")
    login(client, approver)
    page = client.get(reverse("traces:why", args=[Trace.objects.get(run=tool_call.run).pk, tool_call.pk])).content
    page = page.decode()
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert "152 tools; orders.lookup was among them" in page and "and 140 more" in page


def test_a_skill_owner_of_another_tenant_gets_the_answers_without_the_data(batch):
    tool_call = ToolCall.objects.get(run=batch.run, call_id="c-invalid")
    spans = list(Span.objects.filter(call=tool_call))
    shown = " ".join(text(answer) for answer in explain_call(call=tool_call, spans=spans, full=False))
    assert "nope" not in shown and "'ten'" not in shown and "customer email" not in shown and "web.search" not in shown
    assert "The arguments were rejected." in shown and "Tainted." in shown
