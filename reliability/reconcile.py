"""Reconciliation of unknown outcomes: ask the tool by idempotency key, else let an owner decide."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from reliability import tasks
from reliability.models import ReconciliationItem, ReconciliationReason, ReconciliationStatus, Resolution
from runs.errors import CallError
from runs.models import CallStatus, ToolCall
from runs.plane.asking import ask
from runs.plane.delivery import deliver_final_result

logger = logging.getLogger(__name__)
MAX_TOOL_CHECKS = 8


class AlreadyResolved(Exception):
    """Someone (the tool or another owner) resolved the item first."""


def first_check_delay() -> timedelta:
    return timedelta(seconds=settings.AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS)


def _manifest(call: ToolCall | None) -> dict:
    return (call.skill_version.manifest if call is not None and call.skill_version_id else {}) or {}


def can_ask_tool(call: ToolCall | None) -> bool:
    return bool(_manifest(call).get("execution", {}).get("reconcile")) and bool(call and call.idempotency_key)


def open_reconciliation(*, call: ToolCall, reason: str, note: str = "") -> ReconciliationItem:
    """One open item per call and reason; the tool is asked first when the skill says how."""
    call = ToolCall.objects.select_related("run", "skill_version").get(pk=call.pk)
    item, created = ReconciliationItem.objects.get_or_create(
        call=call,
        reason=reason,
        defaults={
            "tenant_id": call.run.tenant_id,
            "run_id": call.run_id,
            "skill_name": call.name,
            "idempotency_key": call.idempotency_key,
            "note": note,
            "next_check_at": timezone.now() + first_check_delay() if can_ask_tool(call) else None,
        },
    )
    if created and item.next_check_at is not None:
        transaction.on_commit(
            lambda: tasks.check_reconciliation.apply_async(
                args=[item.pk], countdown=first_check_delay().total_seconds()
            )
        )
    return item


def check_with_tool(*, item_id: int) -> ReconciliationItem:
    """Ask the tool what happened to the key; resolve on a clear answer, else look again later."""
    item = ReconciliationItem.objects.select_related("call__skill_version", "call__run", "run__tenant").get(pk=item_id)
    call = item.call
    if not item.is_open or not can_ask_tool(call):
        return item
    if item.reason == ReconciliationReason.TIMEOUT and call.status == CallStatus.EXECUTING:
        _later(item, "the call's outcome is still being recorded")  # the gate has not written it yet
        return item
    claimed = ReconciliationItem.objects.filter(
        pk=item.pk, status=ReconciliationStatus.OPEN, checks=item.checks
    ).update(checks=F("checks") + 1, last_check_at=timezone.now())
    if not claimed:
        return item
    item.checks += 1
    manifest = _manifest(call)
    try:
        answer = ask(
            manifest=manifest,
            target=manifest["execution"]["reconcile"],
            field="idempotency_key",
            value=item.idempotency_key,
            tenant_slug=item.run.tenant.slug,
            end_user=call.run.end_user,
        )
    except CallError as exc:
        _later(item, exc.message)
        return item
    status = answer["status"]
    if status == "succeeded":
        return resolve_reconciliation(
            item=item,
            resolution=Resolution.SUCCEEDED,
            source="tool",
            note="The tool reports the call took effect.",
            content=answer.get("result"),
        )
    if status in ("failed", "not_found"):
        return resolve_reconciliation(
            item=item,
            resolution=Resolution.FAILED,
            source="tool",
            note=f"The tool reports the call did not take effect ({status}).",
        )
    _later(item, f"the tool says {status}")
    return item


def _later(item: ReconciliationItem, why: str) -> None:
    give_up = item.checks >= MAX_TOOL_CHECKS
    delay = first_check_delay() * (2 ** min(item.checks, 6))
    ReconciliationItem.objects.filter(pk=item.pk).update(
        last_check_error=("gave up asking the tool; an owner must decide: " if give_up else "") + why[:250],
        next_check_at=None if give_up else timezone.now() + delay,
    )


def resolve_reconciliation(
    *, item: ReconciliationItem, resolution: str, note: str = "", user=None, source: str = "owner", content=None
) -> ReconciliationItem:
    """Close the item (first resolver wins) and deliver the final outcome to the call, run and trace."""
    if resolution not in Resolution.values:
        raise ValueError(f"resolution must be one of {', '.join(Resolution.values)}")
    now = timezone.now()
    with transaction.atomic():
        updated = ReconciliationItem.objects.filter(pk=item.pk, status=ReconciliationStatus.OPEN).update(
            status=ReconciliationStatus.RESOLVED,
            resolution=resolution,
            note=note[:2000],
            resolved_by=user,
            resolved_source=source,
            resolved_at=now,
            next_check_at=None,
        )
        if not updated:
            raise AlreadyResolved("This item was already resolved.")
        item.refresh_from_db()
        if item.call_id is not None and item.reason == ReconciliationReason.TIMEOUT:
            _deliver(item, resolution=resolution, note=note, source=source, content=content)
    return item


def _deliver(item: ReconciliationItem, *, resolution: str, note: str, source: str, content) -> None:
    call = ToolCall.objects.select_related("run", "skill_version").get(pk=item.call_id)
    reconciled = {"resolution": resolution, "by": source, "note": note}
    if resolution == Resolution.SUCCEEDED:
        result = {
            "call_id": call.call_id,
            "status": "ok",
            "is_error": False,
            "content": content if content is not None else {"reconciled": "succeeded"},
            "skill": {"name": call.name, "version": call.skill_version.version if call.skill_version else ""},
            "truncated": False,
            "warnings": [],
            "reconciled": reconciled,
        }
        error_class = ""
    else:
        result = {
            "call_id": call.call_id,
            "status": "error",
            "is_error": True,
            "reconciled": reconciled,
            "error": {
                "class": "unavailable",
                "code": "did_not_take_effect",
                "message": "The call did not take effect (found during reconciliation); it is safe to "
                "try again with a new idempotency key.",
            },
        }
        error_class = "unavailable"
    deliver_final_result(
        call=call,
        result=result,
        status=CallStatus.RECONCILED,
        error_class=error_class,
        span_name=f"{call.name} reconciled",
        attributes={"airlock.reconciliation.resolution": resolution, "airlock.reconciliation.source": source},
    )


def due_items(limit: int = 100) -> list[int]:
    return list(
        ReconciliationItem.objects.filter(
            status=ReconciliationStatus.OPEN, next_check_at__lte=timezone.now()
        ).values_list("pk", flat=True)[:limit]
    )
