"""Pipelines as sagas: ordered steps through the gate, pre-conditions, compensation, reconciliation."""

import pytest
from django.urls import reverse

from reliability.models import Pipeline, PipelineStatus, ReconciliationItem, StepStatus
from reliability.sagas import advance_pipeline
from runs.models import ToolCall
from tests.reliability.conftest import publish, skill
from tests.runs.conftest import start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(world, flaky):
    skill("orders.get_order", f"{flaky.url}/order")
    skill("billing.create_refund", f"{flaky.url}/refund", effect="write")
    skill("billing.cancel_refund", f"{flaky.url}/cancel", effect="write")
    skill("crm.log_note", f"{flaky.url}/note", effect="write")
    skill("mail.notify", f"{flaky.url}/notify", effect="write")
    publish()
    flaky.default("/order", {"order_id": "ord_1", "status": "paid", "total": 500})
    flaky.default("/refund", {"refund_id": "re_9"})
    flaky.default("/cancel", {"cancelled": True})
    flaky.default("/note", {"note_id": "n1"})
    return flaky


def submit(agent_client, run_id, steps, pipeline_id="p1"):
    return agent_client.post(
        reverse("reliability_api:pipeline_submit", args=[run_id]),
        {"pipeline_id": pipeline_id, "steps": steps},
        format="json",
    )


STEPS = [
    {"step_id": "order", "name": "orders.get_order", "arguments": {"order_id": "ord_1"}},
    {
        "step_id": "refund",
        "name": "billing.create_refund",
        "when": [{"step": "order", "path": "content.status", "equals": "paid"}],
        "arguments": {"order_id": "${order.content.order_id}", "cents": "${order.content.total}"},
        "compensation": {"name": "billing.cancel_refund", "arguments": {"refund_id": "${refund.content.refund_id}"}},
    },
    {"step_id": "note", "name": "crm.log_note", "arguments": {"text": "refund ${refund.content.refund_id}"}},
    {"step_id": "notify", "name": "mail.notify", "arguments": {"to": "ada@example.org"}},
]


def test_pipeline_runs_in_order_with_receipts_and_keys(agent_client, shop, django_capture_on_commit_callbacks):
    shop.default("/notify", {"sent": True})
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        response = submit(agent_client, run["run_id"], STEPS)
    assert response.status_code == 202
    state = agent_client.get(reverse("reliability_api:pipeline_detail", args=[run["run_id"], "p1"])).json()
    assert state["status"] == "succeeded"
    assert [s["status"] for s in state["steps"]] == ["succeeded"] * 4
    assert shop.keys["/refund"] == [f"{run['run_id']}:refund"]
    assert ToolCall.objects.get(call_id="p1:note").arguments == {"text": "refund re_9"}
    # Submitting again, or the task running twice, does not run anything again.
    assert submit(agent_client, run["run_id"], STEPS).status_code == 200
    advance_pipeline(pipeline_pk=Pipeline.objects.get().pk)
    assert shop.hits["/refund"] == 1 and shop.hits["/notify"] == 1


def test_failure_compensates_and_reconciles_steps_without_an_inverse(
    agent_client, shop, django_capture_on_commit_callbacks
):
    shop.default("/notify", 422)
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        submit(agent_client, run["run_id"], STEPS)
    pipeline = Pipeline.objects.get()
    assert pipeline.status == PipelineStatus.FAILED and "notify" in pipeline.error
    steps = {s.step_id: s for s in pipeline.steps.all()}
    assert steps["refund"].status == StepStatus.COMPENSATED
    assert steps["refund"].compensation_receipt["status"] == "ok"
    assert shop.hits["/cancel"] == 1
    assert steps["note"].status == StepStatus.NO_INVERSE
    assert steps["notify"].status == StepStatus.FAILED
    assert steps["order"].status == StepStatus.SUCCEEDED  # a read needs no undoing
    item = ReconciliationItem.objects.get()
    assert item.reason == "no_inverse" and item.call.call_id == "p1:note"


def test_false_precondition_skips_the_step(agent_client, shop, django_capture_on_commit_callbacks):
    shop.default("/order", {"order_id": "ord_1", "status": "refunded", "total": 500})
    shop.default("/notify", {"sent": True})
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        submit(agent_client, run["run_id"], STEPS[:2])
    assert [s.status for s in Pipeline.objects.get().steps.all()] == [StepStatus.SUCCEEDED, StepStatus.SKIPPED]
    assert shop.hits["/refund"] == 0


def test_malformed_pipelines_are_refused(agent_client, shop):
    run = start_run(agent_client)
    bad = [
        {"step_id": "a", "name": "orders.get_order", "when": [{"step": "later"}]},
        {"step_id": "later", "name": "orders.get_order"},
    ]
    response = submit(agent_client, run["run_id"], bad)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_pipeline"
    assert submit(agent_client, run["run_id"], []).status_code == 400


def test_another_tenants_agent_cannot_see_or_submit(agent_client, outsider_agent_client, shop):
    run = start_run(agent_client)
    assert submit(outsider_agent_client, run["run_id"], STEPS).status_code == 404
    assert (
        outsider_agent_client.get(reverse("reliability_api:pipeline_detail", args=[run["run_id"], "p1"])).status_code
        == 404
    )


def test_run_page_shows_steps_receipts_and_compensations(
    client, viewer, agent_client, shop, django_capture_on_commit_callbacks
):
    from tests.conftest import login

    shop.default("/notify", 422)
    run = start_run(agent_client)
    with django_capture_on_commit_callbacks(execute=True):
        submit(agent_client, run["run_id"], STEPS)
    login(client, viewer)
    page = client.get(reverse("runs:run_detail", args=[run["run_id"]])).content.decode()
    assert 'Pipeline <span class="mono">p1</span>' in page
    assert "Compensated" in page or "compensated" in page
    assert "billing.cancel_refund · done" in page
    assert "Done; no compensation declared" in page and "Reconciliation" in page
