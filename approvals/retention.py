"""The audit log under retention: the one path allowed to change `ApprovalEvent` rows.

The log is append-only for everyone else (`ApprovalEvent.save`/`delete` and the queryset's
`update`/`delete`/`bulk_update` raise `AppendOnlyError`). Retention needs two exceptions, both here:

1. When a run past its retention period is deleted, its approval requests go and their audit rows
   stay, reduced to the redacted form below (`redact_and_delete_requests`). A row keeps who acted
   (`actor_label`), what (`action`, `from_status`, `to_status`), when (`created_at`), and for which
   tenant, approval, run, call and skill (the kept fields). Its `detail` keeps only identifiers,
   counts and hashes (`KEPT_DETAIL_KEYS`), the paths of edited arguments without their values, and
   a hash marker (`traces.redaction.redacted_marker`) for anything else: no arguments, no results,
   no free text.
2. A detached row (its request deleted) is deleted `AIRLOCK_AUDIT_RETENTION_DAYS` after it was
   detached (`detached_at`, set with the redaction), never counted from when it was written: a row
   written long before its run ended still gets the whole audit period (`purge_expired_audit`), in
   small separate deletes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from approvals.models import ApprovalEvent, ApprovalRequest
from lib.append_only import purge_detached, redact_and_detach
from traces.redaction import mask_secrets, redact, redacted_marker

# Identifiers, counts, flags and hashes: what an auditor needs to tell decisions apart, nothing reusable.
KEPT_DETAIL_KEYS = frozenset(
    {
        "via",
        "rule_id",
        "policy_version",
        "arguments_sha256",
        "votes",
        "required",
        "approvers",
        "edited",
        "is_error",
        "error_class",
        "error_code",
    }
)
RETENTION_REASON = "retention"


def redacted_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """The documented redacted form of an audit row's `detail` (see the module docstring)."""
    out: dict[str, Any] = {}
    for key, value in (detail or {}).items():
        if key in KEPT_DETAIL_KEYS:
            out[key] = redact(value)
        elif key == "changes" and isinstance(value, list):
            out[key] = [
                {"path": mask_secrets(str(change.get("path", ""))), "op": str(change.get("op", ""))}
                for change in value
                if isinstance(change, dict)
            ]
        else:
            out[key] = redacted_marker(value, reason=RETENTION_REASON)
    return out


def _redact_detached_rows(rows: Iterable[ApprovalEvent], now: datetime) -> int:
    """Redact rows that outlive (or have outlived) their request, and start their audit period now."""
    return redact_and_detach(
        rows, queryset=ApprovalEvent.retention_queryset(), redacted_detail=redacted_detail, now=now
    )


def unredacted_rows_of(requests: list[int] | QuerySet) -> QuerySet[ApprovalEvent]:
    """The rows deleting these requests (ids, or a query of ids) redacts and detaches."""
    return ApprovalEvent.retention_queryset().filter(request_id__in=requests, redacted_at__isnull=True)


def redact_and_delete_requests(*, request_ids: list[int], now: datetime | None = None) -> tuple[int, int]:
    """Redact the audit rows of these approval requests, then delete the requests (and their votes);
    the rows stay, detached as of `now`. One short transaction, so no row is ever detached unredacted.
    Returns (rows redacted, requests deleted)."""
    now = now or timezone.now()
    with transaction.atomic():
        redacted = _redact_detached_rows(unredacted_rows_of(request_ids).only("pk", "detail"), now)
        deleted = ApprovalRequest.objects.filter(pk__in=request_ids).delete()[1].get("approvals.ApprovalRequest", 0)
    return redacted, deleted


def detached_unredacted() -> QuerySet[ApprovalEvent]:
    """Rows whose request was deleted some other way (an admin deleting a run): retention redacts them too,
    and their audit period starts then (the moment of the deletion was not recorded; never earlier)."""
    return ApprovalEvent.retention_queryset().filter(request__isnull=True, redacted_at__isnull=True)


def expired_audit(*, now: datetime | None = None) -> QuerySet[ApprovalEvent]:
    """Rows detached longer ago than the audit period; none while AIRLOCK_AUDIT_RETENTION_DAYS is 0 (kept
    forever). A detached row not yet redacted has no `detached_at` and is not expired."""
    if not settings.AIRLOCK_AUDIT_RETENTION_DAYS:
        return ApprovalEvent.retention_queryset().none()
    cutoff = (now or timezone.now()) - timedelta(days=settings.AIRLOCK_AUDIT_RETENTION_DAYS)
    return ApprovalEvent.retention_queryset().filter(request__isnull=True, detached_at__lt=cutoff)


def purge_expired_audit(*, now: datetime | None = None, batch_size: int, max_batches: int) -> tuple[int, int, int]:
    """Redact stray detached rows, then delete detached rows past the audit period, `batch_size` rows
    per statement and at most `max_batches` statements. Returns (redacted, deleted, statements)."""
    now = now or timezone.now()
    return purge_detached(
        stray=detached_unredacted,
        expired=lambda: expired_audit(now=now),
        queryset=ApprovalEvent.retention_queryset(),
        redacted_detail=redacted_detail,
        now=now,
        batch_size=batch_size,
        max_batches=max_batches,
    )
