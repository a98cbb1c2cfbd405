"""The adapter interface: one object per scheme, `invoke(...)` returns an AdapterResult or raises a CallError."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class InvocationContext:
    """What an adapter may know about the call besides its arguments."""

    run_id: str
    call_id: str
    tenant: str
    agent_role: str
    end_user: str
    idempotency_key: str = ""
    timeout_s: float = 10.0
    trial: bool = False  # an owner's try or skill test (runs.trials): no run, no breaker, nothing recorded after


@dataclass
class AdapterResult:
    content: Any
    metadata: dict = field(default_factory=dict)


class Adapter(Protocol):
    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult: ...
