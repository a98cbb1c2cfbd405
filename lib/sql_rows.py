"""Model rows in hand-written SQL, for the few statements on the gate's hot path.

Building a queryset costs more Python than the database needs to answer it (about a millisecond and a
half per query with joins and subqueries, on a small CPU). The gate's hot statements are therefore
written once, from the models' own metadata, and their rows are turned back into model instances the
way Django's ORM does it: the same column order, database converters and `Model.from_db`. Writes go the
other way through each field's `pre_save` and `get_db_prep_save`, as Django's INSERT compiler does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from psycopg._queries import PostgresQuery, _query2pg_nocache

ONLY_WHEN_ASKED = 2**31 - 1  # a prepare threshold no statement reaches by repetition


# psycopg remembers how it turned `%s` into `$1` only for texts under 4 KiB and 50 parameters; the gate's
# statements are longer, and converting them again took a tenth of a gate call's CPU. Their texts are a
# small fixed set, so every conversion is kept. (psycopg's private API: pinned in pyproject.toml.)
_converted = lru_cache(maxsize=256)(_query2pg_nocache)


class _ConvertedOnce(PostgresQuery):
    def convert(self, query, vars) -> None:
        if vars is None or not isinstance(query, str | bytes):
            return super().convert(query, vars)
        query = self._ensure_bytes(query)
        self.query, self._want_formats, self._order, self._parts = _converted(query, self._tx.encoding)
        self.dump(vars)


class _PreparingCursor(psycopg.Cursor):
    """Server-side binding, every statement prepared: PostgreSQL plans each text once per connection
    (planning the gate's run query took longer than running it)."""

    _query_cls = _ConvertedOnce

    def execute(self, query, params=None, *, prepare=None, binary=None):  # noqa: ARG002 - always prepared
        return super().execute(query, params, prepare=True, binary=binary)


def hot_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor for the gate's hand-written statements: prepared on PostgreSQL unless
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


class Columns:
    """A model's concrete columns under a table alias, in the order `Model.from_db` expects them."""

    def __init__(self, model: type[models.Model], alias: str, *, defer: Iterable[str] = ()) -> None:
        skipped = set(defer)
        self.model = model
        self.alias = alias
        self.fields = [f for f in model._meta.concrete_fields if f.name not in skipped]
        self.attnames = [f.attname for f in self.fields]
        self._vendor, self._by_field = "", []

    def select(self, connection: BaseDatabaseWrapper) -> str:
        return ", ".join(f"{self.alias}.{quoted(connection, f.column)}" for f in self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def instance(self, connection: BaseDatabaseWrapper, values: Sequence[Any]) -> models.Model:
        """The model instance for this slice of a row, converted as the ORM converts it."""
        converted = list(values)
        for index, column, converters in self._converters(connection):
            for converter in converters:
                converted[index] = converter(converted[index], column, connection)
        return self.model.from_db(connection.alias, self.attnames, converted)

    def _converters(self, connection: BaseDatabaseWrapper) -> list[tuple[int, Any, list]]:
        """(position, column, converters) of the fields that have converters on this connection's backend."""
        if self._vendor != connection.vendor:
            self._by_field = []
            for index, field in enumerate(self.fields):
                column = field.get_col(self.alias)
                converters = [*connection.ops.get_db_converters(column), *field.get_db_converters(connection)]
                if converters:
                    self._by_field.append((index, column, converters))
            self._vendor = connection.vendor
        return self._by_field


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


__all__ = ["Columns", "InsertColumns", "hot_cursor", "quoted"]
