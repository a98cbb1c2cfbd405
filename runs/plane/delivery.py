"""Delivering a call's final outcome after the agent got a provisional one (a job accepted, an
unknown outcome): the call, its idempotency key, the run's event feed and the trace all learn it."""

from __future__ import annotations

import logging

from django.utils import timezone

from runs import lifecycle
from runs.events import append_event
from runs.models import IdempotencyRecord, ToolCall
from traces.recording import record_span_safely

logger = logging.getLogger(__name__)


def deliver_final_result(
    *, call: ToolCall, result: dict, status: str, error_class: str = "", span_name: str, attributes: dict
) -> None:
    """Record `result` as the call's outcome and tell the run (event) and the trace (span)."""
    now = timezone.now()
    if not lifecycle.replace_outcome(call, status=status, result=result, error_class=error_class, finished_at=now):
        logger.warning("Call %s is %s; %s not delivered", call.pk, call.status, span_name)
        return
    if call.idempotency_key:
        IdempotencyRecord.objects.filter(tenant_id=call.run.tenant_id, key=call.idempotency_key).update(outcome=result)
    append_event(run=call.run, kind="call.completed", payload={"call_id": call.call_id, "result": result})
    record_span_safely(
        what=f"the span for {span_name} of call {call.pk}",
        run=call.run,
        kind="other",
        name=span_name,
        started_at=now,
        ended_at=now,
        call=call,
        skill_name=call.name,
        outcome=status,
        error_class=error_class,
        attributes=attributes,
    )
