"""The run event feed agents follow by long poll (`GET /api/v1/runs/{id}/events`) or webhook.

Events are append-only rows; the id is the cursor. After each append (inside the caller's
transaction) the `runs.hooks.event_appended` receivers are called, so that approvals can schedule a
webhook delivery without `runs` importing `approvals`; once that transaction commits, the run's
long polls are woken (lib.wakeups) instead of finding the event at their next database read.
"""

from typing import Any

from lib import wakeups
from runs import hooks
from runs.models import Run, RunEvent
from traces.redaction import redact

EVENT_KINDS = {"approval.requested", "approval.question", "approval.decided", "call.completed", "run.status"}


def append_event(*, run: Run, kind: str, payload: dict[str, Any]) -> RunEvent:
    """Append one event to the run's feed and notify the listeners (webhooks). The payload is redacted
    first, so the long poll and the webhook body (built from the stored event) carry no secret."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"Unknown run event kind {kind!r}; known: {', '.join(sorted(EVENT_KINDS))}.")
    event = RunEvent.objects.create(run=run, kind=kind, payload=redact(payload))
    hooks.event_appended(event)
    wakeups.publish_on_commit(feed_topic(run.pk))
    return event


def feed_topic(run_id: Any) -> str:
    """The wake-up topic of a run's event feed."""
    return f"run-events:{run_id}"


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """The event object of the contract, as the long poll and the webhook body both show it."""
    return {"id": event.id, "kind": event.kind, "payload": event.payload, "created_at": event.created_at.isoformat()}


def events_after(*, run_id: Any, after: int, limit: int = 100) -> list[dict[str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id, id__gt=after).order_by("id")[:limit]
    return [event_to_dict(event) for event in rows]
