"""Typed results of tool calls, one per proposed call, in the order the calls were given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Ok:
    """The skill ran; `content` is its shaped result (maybe truncated, with a note saying so).
    `provenance` (source, adapter, untrusted, active_content_removed) when the gate marked where it
    came from: content from outside the deployment's own code, or marked untrusted."""

    call_id: str
    content: Any
    skill: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    warnings: list[Any] = field(default_factory=list)
    executed_locally: bool = False
    provenance: dict[str, Any] | None = None
    view: str | None = None  # which of the skill's views this is; `other_views` names the rest
    other_views: list[str] = field(default_factory=list)
    next: str | None = None  # the handle of the next page: `run.next_page(result)` follows it
    paging: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    decided_locally: bool = False  # decided from the signed bundle while Airlock was unreachable (spooled)

    ok = True
    status = "ok"


@dataclass(frozen=True)
class Error:
    """The call did not produce a result. `error_class` is one of the contract's classes:
    validation, authorization, approval_required, not_found, conflict, rate_limited, transient,
    timeout_unknown, unavailable, declined, expired, internal. `details["downstream_message"]` is
    what the skill's service said when it refused the call; `details["meaning"]` and
    `details["retryable"]` what the skill's manifest declares for the service's `downstream_code`."""

    call_id: str
    error_class: str
    code: str = ""
    message: str = ""
    retry_after: float | None = None
    fields: Any = None
    details: dict[str, Any] = field(default_factory=dict)
    local: bool = False  # refused by the SDK before the network hop (arguments invalid)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    ok = False
    status = "error"

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again later can help: the skill's declaration for the service's own code
        when there is one, else by class (never for timeout_unknown)."""
        if self.error_class == "timeout_unknown":
            return False
        if isinstance(self.details.get("retryable"), bool):
            return self.details["retryable"]
        return self.error_class in {"rate_limited", "transient", "unavailable"}


@dataclass(frozen=True)
class ApprovalRequired:
    """A person must decide first; follow it with `run.wait(result.approval_id)`."""

    call_id: str
    approval_id: int
    proposed_action: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    expires_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    ok = False
    status = "approval_required"


Result = Ok | Error | ApprovalRequired
# What a model sends inside a call's arguments to ask for a view or the next page: Airlock's tool
# definitions offer them (registry.definitions) and its gate lifts them out (runs.presenting).
VIEW_ARGUMENT, PAGE_ARGUMENT = "airlock_view", "airlock_page"


def more_for_model(result: dict[str, Any]) -> list[str]:
    """The lines that tell a model how to get the rest of an ok result: the other views, and the handle of
    the next page with how to send it. Every adapter that gives a model a result appends them (the SDK's
    integrations, the MCP gateway), so the model reads the same thing through each."""
    lines = []
    if isinstance(result.get("views_note"), str):
        lines.append(result["views_note"])
    if isinstance(result.get("next"), str):
        paging = result.get("paging") if isinstance(result.get("paging"), dict) else {}
        if paging.get("message"):
            lines.append(str(paging["message"]))
        lines.append(f"{PAGE_ARGUMENT}={result['next']}")
    return lines


def result_from_dict(data: dict[str, Any]) -> Result | dict[str, Any]:
    """Turn one result of the API into its typed form (an execute_locally dict is returned as is)."""
    status = data.get("status")
    call_id = str(data.get("call_id", ""))
    if status == "ok":
        return Ok(
            call_id=call_id,
            content=data.get("content"),
            skill=data.get("skill") or {},
            truncated=bool(data.get("truncated")),
            warnings=list(data.get("warnings") or []),
            provenance=data.get("provenance") if isinstance(data.get("provenance"), dict) else None,
            view=data.get("view") if isinstance(data.get("view"), str) else None,
            other_views=list(data.get("other_views") or []),
            next=data.get("next") if isinstance(data.get("next"), str) else None,
            paging=data.get("paging") if isinstance(data.get("paging"), dict) else None,
            raw=data,
        )
    if status == "approval_required":
        return ApprovalRequired(
            call_id=call_id,
            approval_id=int(data["approval_id"]),
            proposed_action=data.get("proposed_action") or {},
            reason=data.get("reason", ""),
            expires_at=data.get("expires_at"),
            raw=data,
        )
    if status == "execute_locally":
        return data
    error = data.get("error") or {}
    known = {"class", "code", "message", "retry_after", "fields"}
    return Error(
        call_id=call_id,
        error_class=error.get("class", "internal"),
        code=error.get("code", ""),
        message=error.get("message", ""),
        retry_after=error.get("retry_after"),
        fields=error.get("fields"),
        details={k: v for k, v in error.items() if k not in known},
        raw=data,
    )
