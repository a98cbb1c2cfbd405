"""What the execution plane tells the layers above it (approvals/, reliability/), which it never imports.

Each hook is connected once, in the receiving app's `AppConfig.ready()`:

- `open_approval(call=, decision=)`: a confirm verdict needs a person. Receiver:
  `approvals.services.open_approval_request`; returns the request (its `pk` and `expires_at` go to the agent).
- `event_appended(event)`: a row was appended to a run's event feed (runs.events.append_event), inside the
  caller's transaction. Receivers: `approvals.webhooks.schedule_deliveries`,
  `approvals.services.cancel_when_run_closes`.
- `open_reconciliation(call=, reason=, note=)`: a call ran but its outcome is unknown. Receiver:
  `reliability.reconcile.open_reconciliation`.
- `register_job(run=, call_id=, skill=, job_id=)`: a long-running tool accepted a job; returns what the
  agent gets meanwhile. Receiver: `reliability.jobs.register_job`.
- `job_callback_url(run_id, call_id)`: where that tool reports the job's end. Receiver:
  `reliability.jobs.callback_url_for`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from lib.hooks import Hook, Signal

if TYPE_CHECKING:
    from runs.models import Run, RunEvent, ToolCall


class OpenApproval(Protocol):
    def __call__(self, *, call: ToolCall, decision: dict) -> Any: ...


class OpenReconciliation(Protocol):
    def __call__(self, *, call: ToolCall, reason: str, note: str = "") -> Any: ...


class RegisterJob(Protocol):
    def __call__(self, *, run: Run, call_id: str, skill: str, job_id: str) -> dict: ...


open_approval: Hook[OpenApproval] = Hook("runs.hooks.open_approval")
event_appended: Signal[Callable[[RunEvent], None]] = Signal("runs.hooks.event_appended")
open_reconciliation: Hook[OpenReconciliation] = Hook("runs.hooks.open_reconciliation")
register_job: Hook[RegisterJob] = Hook("runs.hooks.register_job")
job_callback_url: Hook[Callable[[str, str], str]] = Hook("runs.hooks.job_callback_url")
