"""Audit logs written once: a row is inserted, never saved again nor deleted through the ORM.

Every insert is also a link in its tenant's hash chain: `save` calls `chain_row` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
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
