"""GenAI-convention spans of the agent's own work (model turns, the agent), sent to the run's trace.

Integrations open spans with `SpanRecorder.span(...)`; each finished span is posted to
`POST /api/v1/traces/spans` with the agent's key, under the run's trace id, so model turns show
on the run's timeline without any OTLP set-up. A span that cannot be delivered is logged and
dropped: tracing never fails the agent.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airlock_sdk.errors import AirlockError

if TYPE_CHECKING:
    from airlock_sdk.run import Run

logger = logging.getLogger("airlock_sdk")

# Airlock's span kinds for the GenAI operations (gen_ai.operation.name) the adapters record.
KIND_OF_OPERATION = {"chat": "model_turn", "invoke_agent": "other"}

current_span: contextvars.ContextVar[OpenSpan | None] = contextvars.ContextVar("airlock_span", default=None)


@dataclass
class OpenSpan:
    span_id: str
    parent_span_id: str
    name: str
    operation: str
    started_at: datetime
    attributes: dict[str, Any] = field(default_factory=dict)
    outcome: str = "ok"
    error_class: str = ""

    def set(self, **attributes: Any) -> None:
        self.attributes.update({key: value for key, value in attributes.items() if value is not None})

    def fail(self, error: BaseException) -> None:
        self.outcome, self.error_class = "error", type(error).__name__[:32]
        self.attributes["error.type"] = type(error).__name__


class SpanRecorder:
    """Spans of one run. `span(...)` nests through a context variable; `start`/`end` serve
    frameworks that report beginnings and ends as callbacks. Each finished span is posted from a
    background thread (the agent's event loop never waits on it); `flush()` waits for them."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._senders: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, operation: str, name: str, *, parent: OpenSpan | None = None, **attributes: Any) -> OpenSpan:
        span = OpenSpan(
            span_id=secrets.token_hex(8),
            parent_span_id=parent.span_id if parent else "",
            name=name,
            operation=operation,
            started_at=datetime.now(UTC),
        )
        span.set(**{"gen_ai.operation.name": operation}, **attributes)
        return span

    def end(self, span: OpenSpan, error: BaseException | None = None) -> None:
        if error is not None:
            span.fail(error)
        sender = threading.Thread(target=self.send, args=(span, datetime.now(UTC)), daemon=True)
        with self._lock:
            self._senders = [t for t in self._senders if t.is_alive()] + [sender]
        sender.start()

    @contextmanager
    def span(self, operation: str, name: str, **attributes: Any) -> Iterator[OpenSpan]:
        span = self.start(operation, name, parent=current_span.get(), **attributes)
        token = current_span.set(span)
        error: BaseException | None = None
        try:
            yield span
        except BaseException as exc:
            error = exc
            raise
        finally:
            current_span.reset(token)
            self.end(span, error)

    def flush(self, timeout: float = 10) -> None:
        """Wait (up to `timeout` seconds) until the finished spans are delivered."""
        with self._lock:
            senders = list(self._senders)
        for sender in senders:
            sender.join(timeout)

    def send(self, span: OpenSpan, ended_at: datetime) -> None:
        body = {
            "trace_id": self.run.trace_id or None,
            "run_id": None if self.run.trace_id else self.run.run_id,
            "span_id": span.span_id,
            "parent_span_id": span.parent_span_id,
            "kind": KIND_OF_OPERATION.get(span.operation, "other"),
            "name": span.name,
            "started_at": span.started_at.isoformat(),
            "ended_at": ended_at.isoformat(),
            "outcome": span.outcome,
            "error_class": span.error_class,
            "attributes": span.attributes,
        }
        try:
            self.run.airlock.transport.json(
                "POST",
                "/api/v1/traces/spans",
                safe=True,
                expect=(202,),  # a span id is stored once: a resend is a duplicate, not a second span
                json={"spans": [{key: value for key, value in body.items() if value is not None}]},
            )
        except AirlockError as exc:
            logger.warning("Could not record the %s span on the run's trace: %s", span.name, exc)
