"""The decision history of a tenant: every approval, edit-approval, vote, decline, expiry and cancellation,
read from the append-only audit log (ApprovalEvent), filtered, and exported as CSV or JSON Lines.

What a row shows of the arguments is what the inbox shows anyone once a request is closed: the form
stored at rest, through `approvals.masking.mask`. For confidential and restricted skills, and for rows
that outlived their request, no argument value appears at all (not even the hash and preview kept at
rest). Exports are produced in batches, so a long history never sits in memory.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import Q, QuerySet
from django.urls import reverse

from approvals.masking import MASK, mask
from approvals.models import ApprovalEvent
from approvals.notices import arguments_withheld
from audit.chain import export_records
from policies.models import GrantEvent

# The audit actions that are decisions; "approved" with `detail.edited` is an edit-approval.
DECISION_ACTIONS = ("approved", "declined", "vote", "expired", "cancelled")
EXPORT_BATCH = 500
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
COLUMNS = (
    "id",
    "at",
    "tenant",
    "outcome",
    "decided_by",
    "via",
    "reason",
    "skill",
    "skill_version",
    "agent",
    "approval_id",
    "run_id",
    "call_id",
    "arguments",
    "changes",
    "request_url",
    "trace_url",
)


def decisions_in(tenant_ids: Iterable[int], filters: dict[str, Any]) -> QuerySet[ApprovalEvent]:
    """The decisions of these tenants matching the (validated) filters, newest first."""
    events = ApprovalEvent.objects.in_tenants(tenant_ids).filter(action__in=DECISION_ACTIONS)
    if filters.get("skill"):
        events = events.filter(skill_name__icontains=filters["skill"])
    if filters.get("approver"):
        events = events.filter(actor_label=filters["approver"])
    if filters.get("agent"):
        events = events.filter(request__agent__name=filters["agent"])
    outcome = filters.get("outcome")
    if outcome == "edited":
        events = events.filter(action="approved", detail__edited=True)
    elif outcome:
        events = events.filter(action=outcome)
    if filters.get("date_from"):
        events = events.filter(created_at__date__gte=filters["date_from"])
    if filters.get("date_to"):
        events = events.filter(created_at__date__lte=filters["date_to"])
    return events.select_related("tenant", "request__agent").order_by("-created_at", "-id")


def outcome_of(event: ApprovalEvent) -> str:
    if event.action == "approved" and event.detail.get("edited"):
        return "edit-approved"
    return event.action


def _masked(value: Any) -> Any:
    """`mask`, and a redacted marker kept at rest (hash and preview) shown as the mask: an export
    travels further than the console, so it keeps nothing derived from a sensitive value."""
    if isinstance(value, dict):
        if value.get("redacted") is True:
            return MASK
        return {key: _masked(item) for key, item in mask(value).items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return mask(value)


def _shown_arguments(event: ApprovalEvent) -> Any:
    request = event.request
    if request is None or arguments_withheld(request):
        return None
    return _masked(request.action.get("arguments"))


def _shown_changes(event: ApprovalEvent) -> list[dict] | None:
    changes = event.detail.get("changes")
    if not changes:
        return None
    if event.request is None or arguments_withheld(event.request):
        return [{"path": change.get("path"), "op": change.get("op")} for change in changes]
    return _masked(changes)


def decision_row(event: ApprovalEvent) -> dict[str, Any]:
    """One decision as the page, the exports and the API show it."""
    request = event.request
    agent = request.agent.name if request is not None and request.agent is not None else ""
    return {
        "id": event.pk,
        "at": event.created_at.isoformat(),
        "tenant": event.tenant.slug if event.tenant else "",
        "outcome": outcome_of(event),
        "decided_by": event.actor_label,
        "via": event.detail.get("via") or "system",
        "reason": mask(str(event.detail.get("reason") or "")),
        "skill": event.skill_name,
        "skill_version": event.skill_version,
        "agent": agent,
        "approval_id": event.approval_ref,
        "run_id": str(event.run_ref) if event.run_ref else None,
        "call_id": event.call_ref,
        "arguments": _shown_arguments(event),
        "changes": _shown_changes(event),
        "request_url": reverse("approvals:detail", args=[request.pk]) if request is not None else None,
        "trace_url": reverse("traces:for_run", args=[event.run_ref]) if event.run_ref else None,
    }


def _batches(events: QuerySet[ApprovalEvent]) -> Iterator[ApprovalEvent]:
    """Every event of the queryset in its order (newest first), read EXPORT_BATCH rows at a time."""
    last = None
    while True:
        batch = events
        if last is not None:
            batch = events.filter(Q(created_at__lt=last.created_at) | Q(created_at=last.created_at, id__lt=last.pk))
        rows = list(batch[:EXPORT_BATCH])
        yield from rows
        if len(rows) < EXPORT_BATCH:
            return
        last = rows[-1]


def safe_cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text: a leading = + - @ tab or return could start a formula."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


class _Line:
    """What csv.writer writes to: hands back the line instead of buffering it."""

    def write(self, text: str) -> str:
        return text


def csv_lines(events: QuerySet[ApprovalEvent]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(COLUMNS)
    for event in _batches(events):
        row = decision_row(event)
        yield writer.writerow([safe_cell(row[column]) for column in COLUMNS])


def jsonl_lines(events: QuerySet[ApprovalEvent]) -> Iterator[str]:
    for event in _batches(events):
        yield json.dumps(decision_row(event), ensure_ascii=False, sort_keys=True) + "\n"


def grant_log_row(event: GrantEvent) -> dict[str, Any]:
    """One entry of the grants change log as the audit export shows it."""
    return {
        "type": "grant_event",
        "id": event.pk,
        "at": event.created_at.isoformat(),
        "grant_id": event.grant_ref,
        "action": event.action,
        "skill_pattern": event.skill_pattern,
        "agent_role": event.agent_role,
        "by": event.actor_label,
        "reason": event.reason,
        "oauth_scopes": event.detail.get("oauth_scopes") or [],
        "expires_at": event.detail.get("expires_at"),
    }


def audit_lines(tenant_id: int) -> Iterator[str]:
    """`format=audit`: the tenant's audit chain (key, links, signed checkpoints), then its grants change log,
    oldest first, one JSON object a line. docs/security.md shows how to check it without Airlock."""
    for record in export_records(tenant_id):
        yield json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
    for event in GrantEvent.objects.filter(tenant_id=tenant_id).order_by("created_at", "pk").iterator(EXPORT_BATCH):
        yield json.dumps(grant_log_row(event), ensure_ascii=False, sort_keys=True) + "\n"


EXPORTS = {
    "csv": (csv_lines, "text/csv; charset=utf-8"),
    "jsonl": (jsonl_lines, "application/x-ndjson; charset=utf-8"),
}
