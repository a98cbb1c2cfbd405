"""Audit logs written once: a row is inserted, never saved again nor deleted through the ORM."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models


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
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(self.append_only_message)
