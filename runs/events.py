"""The run event feed agents follow by long poll (`GET /api/v1/runs/{id}/events`) or webhook.

Events are append-only rows; the id is the cursor. Listeners named in EVENT_LISTENERS are called
after each append (inside the caller's transaction) so that, for example, approvals can schedule
a webhook delivery without `runs` importing `approvals`.
"""

from collections.abc import Callable
from functools import cache
from importlib import import_module
from typing import Any

from runs.models import Run, RunEvent

EVENT_KINDS = {"approval.requested", "approval.decided", "call.completed", "run.status"}

# "module:function" paths, each called as function(event) after an event is appended.
EVENT_LISTENERS: list[str] = [
    "approvals.webhooks:schedule_deliveries",
    "approvals.services:cancel_when_run_closes",
]


@cache
def _listeners() -> list[Callable[[RunEvent], None]]:
    loaded = []
    for path in EVENT_LISTENERS:
        module_name, function_name = path.split(":")
        loaded.append(getattr(import_module(module_name), function_name))
    return loaded


def append_event(*, run: Run, kind: str, payload: dict[str, Any]) -> RunEvent:
    """Append one event to the run's feed and notify the listeners (webhooks)."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"Unknown run event kind {kind!r}; known: {', '.join(sorted(EVENT_KINDS))}.")
    event = RunEvent.objects.create(run=run, kind=kind, payload=payload)
    for listener in _listeners():
        listener(event)
    return event


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """The event object of the contract, as the long poll and the webhook body both show it."""
    return {"id": event.id, "kind": event.kind, "payload": event.payload, "created_at": event.created_at.isoformat()}


def events_after(*, run_id: Any, after: int, limit: int = 100) -> list[dict[str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id, id__gt=after).order_by("id")[:limit]
    return [event_to_dict(event) for event in rows]
