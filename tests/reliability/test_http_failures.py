"""Calls through the real gate to a real local HTTP service that misbehaves on purpose.

Proves: reads are retried on transient failures and succeed; 429 waits for Retry-After; errors
that retrying cannot fix are never retried; non-idempotent writes are never repeated; a write
that times out opens reconciliation instead of repeating; each attempt is a span.
"""

import time

import pytest
from django.core import mail

from reliability.models import ReconciliationItem
from runs.models import CallStatus, RunEvent, ToolCall
from tests.reliability.conftest import gate, publish, skill
from traces.models import Span

pytestmark = pytest.mark.django_db


def one(agent, name, arguments=None, call_id="c1", run=None, **extra):
    run, results = gate(agent, [{"call_id": call_id, "name": name, "arguments": arguments or {}, **extra}], run=run)
    return run, results[0]


def test_read_is_retried_after_503s_and_succeeds_with_one_span_per_attempt(world, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=3)
    publish()
    flaky.plan("/item", 503, 503, {"item": "lamp"})
    run, result = one(world["agent"], "catalog.get_item")
    assert result["status"] == "ok" and result["content"] == {"item": "lamp"}
    assert flaky.hits["/item"] == 3
    spans = list(Span.objects.filter(trace__run=run, kind="execution_attempt").order_by("started_at"))
    assert [s.attributes["airlock.attempt"] for s in spans] == [1, 2, 3]
    assert [s.error_class for s in spans] == ["transient", "transient", ""]
    assert all(s.attributes["airlock.breaker.state"] == "closed" for s in spans)
    call_span = Span.objects.get(trace__run=run, kind="tool_call")
    assert call_span.attributes["airlock.attempts"] == 3 and call_span.attributes["airlock.breaker.state"] == "closed"
    assert result["provenance"]["source"] == "catalog.get_item@1.0.0"
    assert ToolCall.objects.get(run=run).attempts == 3  # the run page shows the real count


def test_read_is_retried_after_a_connection_reset(world, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=2)
    publish()
    flaky.plan("/item", "reset", {"item": "desk"})
    _, result = one(world["agent"], "catalog.get_item")
    assert result["status"] == "ok" and result["content"] == {"item": "desk"}
    assert flaky.hits["/item"] == 2


def test_429_waits_for_retry_after_then_succeeds(world, flaky, clock):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=2, timeout_ms=4000)
    publish()
    flaky.plan("/item", ("status", 429, {"Retry-After": "1"}, {"error": "slow down"}), {"item": "chair"})
    started = clock.monotonic()
    run, result = one(world["agent"], "catalog.get_item")
    assert result["status"] == "ok" and clock.monotonic() - started >= 1.0
    first = Span.objects.filter(trace__run=run, kind="execution_attempt").order_by("started_at").first()
    assert first.attributes["airlock.retry.in_s"] >= 1.0


def test_retries_stop_at_max_attempts(world, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=2)
    publish()
    flaky.default("/item", 503)
    _, result = one(world["agent"], "catalog.get_item")
    assert result["error"]["class"] == "transient"
    assert flaky.hits["/item"] == 2


def test_retries_stop_at_the_calls_deadline(world, flaky):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=5, timeout_ms=1500)
    publish()
    flaky.plan("/item", ("status", 429, {"Retry-After": "5"}, {}), {"item": "never reached"})
    started = time.monotonic()
    _, result = one(world["agent"], "catalog.get_item")
    assert result["error"]["class"] == "rate_limited" and result["error"]["retry_after"] == 5
    assert flaky.hits["/item"] == 1 and time.monotonic() - started < 1.5


@pytest.mark.parametrize("status,error_class", [(404, "not_found"), (422, "validation"), (403, "authorization")])
def test_errors_retrying_cannot_fix_are_never_retried(world, flaky, status, error_class):
    skill("catalog.get_item", f"{flaky.url}/item", max_attempts=3)
    publish()
    flaky.default("/item", status)
    _, result = one(world["agent"], "catalog.get_item")
    assert result["error"]["class"] == error_class
    assert flaky.hits["/item"] == 1


def test_non_idempotent_write_is_not_retried(world, flaky):
    skill("billing.charge", f"{flaky.url}/charge", effect="write", max_attempts=3)
    publish()
    flaky.plan("/charge", 503, {"charged": True})
    _, result = one(world["agent"], "billing.charge", {"cents": 100})
    assert result["error"]["class"] == "transient"
    assert flaky.hits["/charge"] == 1


def test_idempotent_write_is_retried_with_the_same_key(world, flaky):
    skill("tickets.set_status", f"{flaky.url}/status", effect="write", max_attempts=3, idempotent=True)
    publish()
    flaky.plan("/status", 502, {"status": "closed"})
    run, result = one(world["agent"], "tickets.set_status", {"status": "closed"})
    assert result["status"] == "ok"
    assert flaky.keys["/status"] == [f"{run.pk}:c1", f"{run.pk}:c1"]


def test_write_timeout_opens_reconciliation_and_is_never_repeated(world, flaky):
    skill(
        "billing.refund",
        f"{flaky.url}/refund",
        effect="write",
        timeout_ms=400,
        max_attempts=3,
        idempotent=True,
        reconcile=f"{flaky.url}/refunds/{{idempotency_key}}",
    )
    publish()
    flaky.plan("/refund", ("hold", {"refund_id": "re_1"}))
    run, result = one(world["agent"], "billing.refund", {"cents": 500})
    assert result["error"]["class"] == "timeout_unknown"
    assert "do not repeat" in result["error"]["message"]
    call = ToolCall.objects.get(run=run, call_id="c1")
    assert call.status == CallStatus.TIMEOUT_UNKNOWN
    item = ReconciliationItem.objects.get(call=call)
    assert item.is_open and item.reason == "timeout" and item.idempotency_key == f"{run.pk}:c1"
    flaky.release()  # the slow request finishes on the server
    flaky.wait_answered("/refund")
    assert flaky.hits["/refund"] == 1

    # The agent repeats the same call: the recorded outcome comes back, nothing is sent again.
    _, again = one(world["agent"], "billing.refund", {"cents": 500}, run=run)
    assert again["error"]["class"] == "timeout_unknown" and flaky.hits["/refund"] == 1

    # Reconciliation asks the tool by idempotency key; the tool says it took effect.
    from reliability.reconcile import check_with_tool

    flaky.default(f"/refunds/{run.pk}:c1", {"status": "succeeded", "result": {"refund_id": "re_1"}})
    item = check_with_tool(item_id=item.pk)
    assert not item.is_open and item.resolution == "succeeded" and item.resolved_source == "tool"
    call.refresh_from_db()
    assert call.status == CallStatus.RECONCILED and call.result["content"] == {"refund_id": "re_1"}
    event = RunEvent.objects.filter(run=run, kind="call.completed").last()
    assert event.payload["result"]["reconciled"]["resolution"] == "succeeded"
    assert Span.objects.filter(trace__run=run, outcome="reconciled").exists()
    _, third = one(world["agent"], "billing.refund", {"cents": 500}, run=run)
    assert third["status"] == "ok" and third["content"] == {"refund_id": "re_1"}
    assert flaky.hits["/refund"] == 1


def test_reconciliation_hears_not_found_as_did_not_take_effect(world, flaky):
    skill(
        "billing.refund",
        f"{flaky.url}/refund",
        effect="write",
        timeout_ms=300,
        reconcile=f"{flaky.url}/refunds/{{idempotency_key}}",
    )
    publish()
    flaky.plan("/refund", ("hold", {}))
    run, result = one(world["agent"], "billing.refund", {"cents": 1})
    flaky.default(f"/refunds/{run.pk}:c1", 404)
    from reliability.reconcile import check_with_tool

    item = check_with_tool(item_id=ReconciliationItem.objects.get().pk)
    assert item.resolution == "failed"
    assert ToolCall.objects.get(run=run).result["error"]["code"] == "did_not_take_effect"


def test_write_reset_mid_call_is_outcome_unknown_not_repeated(world, flaky):
    skill("billing.charge", f"{flaky.url}/charge", effect="write", max_attempts=1)
    publish()
    flaky.plan("/charge", "reset")
    run, result = one(world["agent"], "billing.charge", {"cents": 100})
    assert result["error"]["class"] == "timeout_unknown"
    assert flaky.hits["/charge"] == 1
    assert ReconciliationItem.objects.filter(run=run, reason="timeout").count() == 1


def test_wrong_shape_is_an_internal_error_a_marked_span_and_an_owner_alert(world, flaky):
    schema = {"type": "object", "required": ["item"], "properties": {"item": {"type": "string"}}}
    skill("catalog.get_item", f"{flaky.url}/item", output_schema=schema)
    publish()
    flaky.default("/item", {"items": [1, 2]})
    run, result = one(world["agent"], "catalog.get_item")
    assert result["error"] == {
        "class": "internal",
        "code": "contract_violation",
        "message": "The tool returned an unexpected shape; the result was withheld and the owners were told.",
    }
    span = Span.objects.get(trace__run=run, kind="execution_attempt")
    assert span.outcome == "contract_violation" and "item" in span.attributes["airlock.contract_violation"]
    assert mail.outbox and mail.outbox[0].to == ["owners@example.com"]
    assert "output_schema" in mail.outbox[0].subject


def test_typed_not_found_variant_is_preserved(world, flaky):
    schema = {
        "oneOf": [
            {"type": "object", "required": ["found", "item"], "properties": {"found": {"const": True}}},
            {"type": "object", "required": ["found"], "properties": {"found": {"const": False}}},
        ]
    }
    skill("catalog.get_item", f"{flaky.url}/item", output_schema=schema)
    publish()
    flaky.default("/item", {"found": False})
    _, result = one(world["agent"], "catalog.get_item")
    assert result["status"] == "ok" and result["content"] == {"found": False}


def test_active_content_is_stripped_and_provenance_marked(world, flaky):
    skill("support.read_email", f"{flaky.url}/email")
    publish()
    flaky.default(
        "/email",
        {
            "body": 'Hi <script>fetch("/x")</script><img src=x onerror="steal()">'
            '<a href="javascript:alert(1)">refund</a>'
        },
    )
    _, result = one(world["agent"], "support.read_email")
    body = result["content"]["body"]
    assert "<script" not in body and "onerror" not in body and "javascript:" not in body
    assert "Hi" in body and "refund" in body
    assert result["provenance"]["untrusted"] is True and result["provenance"]["active_content_removed"] >= 3
