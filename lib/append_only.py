"""Audit logs written once: a row is inserted, never saved again nor deleted through the ORM.

Every insert is also a link in its tenant's hash chain: `save` calls `chain_row` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, ClassVar

from django.db import models, transaction

from lib.hooks import Hook

# Receiver: audit.chain.append_link (connected in AuditConfig.ready), which links the new row into its
# tenant's chain under a per-tenant lock.
chain_row: Hook[Callable[[AppendOnlyModel], None]] = Hook("chain_row")


class AppendOnlyError(ValueError):
    """A change to a row of an append-only log."""


class AppendOnlyModel(models.Model):
    """Base of every audit log. `append_only_message` names the log in the error a changed row raises."""

    append_only_message: ClassVar[str] = "This audit log is append-only."

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise AppendOnlyError(self.append_only_message)
        with transaction.atomic(using=kwargs.get("using")):
            super().save(*args, **kwargs)
            chain_row(self)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(self.append_only_message)


def redact_and_detach(
    rows: Iterable[models.Model], *, queryset: models.QuerySet, redacted_detail: Callable[[dict], dict], now: datetime
) -> int:
    """Retention's one write to an audit log: rows that outlive what they record keep a redacted `detail` and
    start their own audit period now (`redacted_at`, `detached_at`). `queryset` is the log's retention queryset,
    the only one allowed to update it."""
    changed = []
    for row in rows:
        row.detail = redacted_detail(row.detail)
        row.redacted_at = row.detached_at = now
        changed.append(row)
    if changed:
        queryset.bulk_update(changed, ["detail", "redacted_at", "detached_at"])
    return len(changed)


def purge_detached(
    *,
    stray: Callable[[], models.QuerySet],
    expired: Callable[[], models.QuerySet],
    queryset: models.QuerySet,
    redacted_detail: Callable[[dict], dict],
    now: datetime,
    batch_size: int,
    max_batches: int,
) -> tuple[int, int, int]:
    """Retention's pass over one audit log: redact stray detached rows, then delete detached rows past the audit
    period, `batch_size` rows per statement and at most `max_batches` statements. (redacted, deleted, statements)."""
    redacted = deleted = batches = 0
    while batches < max_batches:
        rows = list(stray().order_by("pk").only("pk", "detail")[:batch_size])
        if not rows:
            break
        redacted += redact_and_detach(rows, queryset=queryset, redacted_detail=redacted_detail, now=now)
        batches += 1
    while batches < max_batches:
        ids = list(expired().order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        deleted += queryset.filter(pk__in=ids).delete()[0]
        batches += 1
    return redacted, deleted, batches
