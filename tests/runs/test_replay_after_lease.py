"""A write whose process died mid-execution, retried by its agent: while the lease runs the retry is told
`in_progress`; once the lease has run out it is told the reconciliation outcome (the effect is unknown,
nothing runs again), never `in_progress` until the beat's sweep comes round. (With real processes, one
SIGKILLed mid-call and the retry sent to another: tests/faults/test_three_processes.py.)"""

import pytest

from reliability.models import ReconciliationItem, ReconciliationReason
from runs.adapters.python import register
from runs.models import CallStatus, IdempotencyRecord, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

ARGUMENTS = {"order_id": "ord_1", "amount_cents": 500}
_effects: list[dict] = []


class ProcessDied(BaseException):
    """What the gate sees of a SIGKILL: nothing after this point runs, no handler catches it."""


@register("test.dies_mid_write", effect="write")
def dies_mid_write(*, arguments, context):
    _effects.append(arguments)
    raise ProcessDied


@pytest.fixture
def dying_write(acme):
    _effects.clear()
    make_skill("orders.refund", effect="write", adapter="python:test.dies_mid_write", timeout_ms=1000)
    grant(acme, "orders.*")


def _left_executing(agent_client) -> tuple[str, ToolCall]:
    run = start_run(agent_client)
    with pytest.raises(ProcessDied):
        post_calls(agent_client, run["run_id"], [call("c1", "orders.refund", ARGUMENTS, idempotency_key="refund-1")])
    left = ToolCall.objects.get(call_id="c1")
    assert left.status == CallStatus.EXECUTING and left.result is None and left.lease_expires_at is not None
    return run["run_id"], left


def test_a_retry_within_the_lease_is_told_in_progress(agent_client, dying_write):
    run_id, _ = _left_executing(agent_client)
    retried = post_calls(agent_client, run_id, [call("c1", "orders.refund", ARGUMENTS, idempotency_key="refund-1")])
    assert retried.json()["results"][0]["error"]["code"] == "in_progress"
    assert len(_effects) == 1


def test_a_retry_after_the_lease_ran_out_is_told_the_reconciliation_outcome_and_nothing_runs_again(
    agent_client, dying_write, clock
):
    run_id, left = _left_executing(agent_client)
    clock.advance((left.lease_expires_at - left.started_at).total_seconds() + 1)

    retries = [
        post_calls(agent_client, run_id, [call("c1", "orders.refund", ARGUMENTS, idempotency_key="refund-1")]),
        post_calls(agent_client, run_id, [call("c1", "orders.refund", ARGUMENTS, idempotency_key="refund-1")]),
        # the same key from another call id of the run: the key's record leads to the same call
        post_calls(agent_client, run_id, [call("c2", "orders.refund", ARGUMENTS, idempotency_key="refund-1")]),
    ]

    for retried in retries:
        error = retried.json()["results"][0]["error"]
        assert (error["class"], error["code"]) == ("timeout_unknown", "lease_expired"), error
    left.refresh_from_db()
    assert left.status == CallStatus.TIMEOUT_UNKNOWN and left.result["error"]["code"] == "lease_expired"
    item = ReconciliationItem.objects.get(call=left)
    assert item.reason == ReconciliationReason.TIMEOUT and item.is_open
    assert len(_effects) == 1  # the refund was never attempted again
    assert IdempotencyRecord.objects.get(key="refund-1").call_id == left.pk
