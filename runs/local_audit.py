"""The audit log of flagged local calls under retention: the one path allowed to change `LocalFlagEvent` rows.

A call the agent's SDK decided locally and the upload flagged (runs.local_review) gets one audit row, written
with the call (`record_flag`) and chained like every audit log. The rows are append-only for everyone else.
Retention needs two exceptions, both here, as for approvals' audit rows (approvals.retention):

1. When a run past its retention period is deleted, its calls go and their flag rows stay, reduced to the
   redacted form below (`redact_and_delete_calls`): who decided (the agent), what (skill and version, bundle,
   verdict), when (`decided_at`), for which tenant, run and call (the kept fields). Its `detail` keeps only
   codes and hashes (`KEPT_DETAIL_KEYS`) and a hash marker (`traces.redaction.redacted_marker`) for the
   reasons, which are free text: no arguments, no results.
2. A detached row (its call deleted) is deleted `AIRLOCK_AUDIT_RETENTION_DAYS` after it was detached
   (`detached_at`, set with the redaction), never counted from when it was written (`purge_expired_audit`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from lib.append_only import purge_detached, redact_and_detach
from runs.models import LocalFlagEvent, ToolCall
from traces.redaction import redact, redacted_marker

KEPT_DETAIL_KEYS = frozenset({"code", "rule_id", "arguments_sha256", "call_status", "error_class"})
RETENTION_REASON = "retention"


def record_flag(*, call: ToolCall, agent_id: int, agent_name: str, verdict: str, reason: str, **detail: Any) -> None:
    """The audit row of a flagged local call (its LocalDecision says the same while the run is kept)."""
    local = call.local
    LocalFlagEvent.objects.create(
        call=call,
        tenant_id=call.run.tenant_id,
        run_ref=call.run_id,
        call_ref=call.call_id,
        agent_ref=agent_id,
        agent_label=agent_name,
        skill_name=call.name,
        skill_version=call.requested_version,
        bundle_number=local.bundle_number,
        decided_at=local.decided_at,
        flag_verdict=verdict,
        detail={
            "flag_reason": reason,
            "local_reason": local.local_reason,
            "arguments_sha256": call.arguments_sha256,
            "call_status": call.status,
            "error_class": call.error_class,
            **detail,
        },
    )


def redacted_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """The documented redacted form of a flag row's `detail` (see the module docstring)."""
    return {
        key: redact(value) if key in KEPT_DETAIL_KEYS else redacted_marker(value, reason=RETENTION_REASON)
        for key, value in (detail or {}).items()
    }


def _redact_detached_rows(rows: Iterable[LocalFlagEvent], now: datetime) -> int:
    return redact_and_detach(
        rows, queryset=LocalFlagEvent.retention_queryset(), redacted_detail=redacted_detail, now=now
    )


def unredacted_rows_of(calls: list[int] | QuerySet) -> QuerySet[LocalFlagEvent]:
    """The rows deleting these calls (ids, or a query of ids) redacts and detaches."""
    return LocalFlagEvent.retention_queryset().filter(call_id__in=calls, redacted_at__isnull=True)


def redact_and_delete_calls(*, call_ids: list[int], now: datetime | None = None) -> tuple[int, int]:
    """Redact the flag rows of these calls, then delete the calls (and what they own); the rows stay, detached
    as of `now`. One short transaction, so no row is ever detached unredacted. Returns (redacted, deleted)."""
    now = now or timezone.now()
    with transaction.atomic():
        redacted = _redact_detached_rows(unredacted_rows_of(call_ids).only("pk", "detail"), now)
        deleted = ToolCall.objects.filter(pk__in=call_ids).delete()[1].get("runs.ToolCall", 0)
    return redacted, deleted


def detached_unredacted() -> QuerySet[LocalFlagEvent]:
    """Rows whose call was deleted some other way (an admin deleting a run): retention redacts them too, and
    their audit period starts then."""
    return LocalFlagEvent.retention_queryset().filter(call__isnull=True, redacted_at__isnull=True)


def expired_audit(*, now: datetime | None = None) -> QuerySet[LocalFlagEvent]:
    """Rows detached longer ago than the audit period; none while AIRLOCK_AUDIT_RETENTION_DAYS is 0."""
    if not settings.AIRLOCK_AUDIT_RETENTION_DAYS:
        return LocalFlagEvent.retention_queryset().none()
    cutoff = (now or timezone.now()) - timedelta(days=settings.AIRLOCK_AUDIT_RETENTION_DAYS)
    return LocalFlagEvent.retention_queryset().filter(call__isnull=True, detached_at__lt=cutoff)


def purge_expired_audit(*, now: datetime | None = None, batch_size: int, max_batches: int) -> tuple[int, int, int]:
    """Redact stray detached rows, then delete detached rows past the audit period, `batch_size` rows per
    statement and at most `max_batches` statements. Returns (redacted, deleted, statements)."""
    now = now or timezone.now()
    return purge_detached(
        stray=detached_unredacted,
        expired=lambda: expired_audit(now=now),
        queryset=LocalFlagEvent.retention_queryset(),
        redacted_detail=redacted_detail,
        now=now,
        batch_size=batch_size,
        max_batches=max_batches,
    )


__all__ = [
    "KEPT_DETAIL_KEYS",
    "detached_unredacted",
    "expired_audit",
    "purge_expired_audit",
    "record_flag",
    "redact_and_delete_calls",
    "redacted_detail",
    "unredacted_rows_of",
]
