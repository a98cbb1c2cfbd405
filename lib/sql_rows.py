"""The cursor the gate's hot statements run on, and the columns of its one-statement write.

The run query is the ORM's, compiled once per connection (lib/compiled_query.py). The batch's write
(runs/batch_write.py) is one data-modifying WITH statement the ORM cannot express: its values go through
each field's `pre_save` and `get_db_prep_save`, as Django's INSERT compiler does.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

ONLY_WHEN_ASKED = 2**31 - 1  # a prepare threshold no statement reaches by repetition


class _PreparingCursor(psycopg.Cursor):
    """psycopg's server-side binding cursor with every statement prepared (its public `prepare=True`):
    PostgreSQL plans each text once per connection (planning the gate's run query took longer than
    running it)."""

    def execute(self, query, params=None, *, prepare=None, binary=None):  # noqa: ARG002 - always prepared
        return super().execute(query, params, prepare=True, binary=binary)


def hot_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor for the gate's hot statements: prepared on PostgreSQL unless
    AIRLOCK_DB_PREPARED_STATEMENTS is off (a transaction-mode pooler without prepared-statement support
    in front of PostgreSQL), otherwise Django's own. Errors, query logging and thread checks as Django's."""
    if connection.vendor != "postgresql" or not settings.AIRLOCK_DB_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    session = connection.connection
    if session.prepare_threshold is None:  # Django's default, under which psycopg prepares nothing
        if not connection.in_atomic_block:  # a SET inside a transaction would end with it
            # Plan once: left to choose, PostgreSQL may re-plan the run query on every call, which costs
            # more than running it. Only prepared statements use the setting; Django's bind client-side.
            with session.cursor() as cursor:
                cursor.execute("SET plan_cache_mode = force_generic_plan")
        session.prepare_threshold = ONLY_WHEN_ASKED
    raw = _PreparingCursor(connection.connection)
    return _LoggedCursor(raw, connection) if connection.queries_logged else connection.make_cursor(raw)


class _LoggedCursor(CursorDebugWrapper):
    """Logs the statement as written: Django reads the executed text back from client-side cursors only."""

    def execute(self, sql, params=None):
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


def quoted(connection: BaseDatabaseWrapper, name: str) -> str:
    return connection.ops.quote_name(name)


class InsertColumns:
    """A model's columns for INSERT (all concrete fields but an auto primary key), with typed placeholders."""

    def __init__(self, model: type[models.Model]) -> None:
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if not isinstance(f, models.AutoField)]

    def names(self, connection: BaseDatabaseWrapper) -> str:
        return ", ".join(quoted(connection, f.column) for f in self.fields)

    def placeholders(self) -> str:
        """`(%s, ...)` for one row: in INSERT ... VALUES each parameter takes its column's type."""
        return "(" + ", ".join(["%s"] * len(self.fields)) + ")"

    def params(self, connection: BaseDatabaseWrapper, instance: models.Model) -> list[Any]:
        return [f.get_db_prep_save(f.pre_save(instance, add=True), connection) for f in self.fields]


__all__ = ["InsertColumns", "hot_cursor", "quoted"]
