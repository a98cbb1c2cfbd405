"""A hot query written once with the ORM and compiled once per database connection.

Building a queryset and compiling it costs more Python than the database needs to answer it (about a
millisecond and a half for the gate's run query, with its joins and subqueries, on a small CPU). A
`CompiledQuery` builds its queryset once per connection, with `Slot`s where the values go, keeps the
compiler's SQL and parameters, and on each execution fills the slots in and turns the row back into
instances through the same compiler, as the ORM does (select_related, annotations, database converters).
On PostgreSQL it runs as a prepared statement (lib/sql_rows.hot_cursor); the text is the ORM's on every
database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.query import get_related_populators

from lib.sql_rows import hot_cursor


class Slot(models.Expression):
    """A named parameter of a compiled query: `%s` in its SQL, filled in on every execution."""

    def __init__(self, name: str, output_field: models.Field) -> None:
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler, connection: BaseDatabaseWrapper) -> tuple[str, list]:  # noqa: ARG002
        return "%s", [self]

    def db_value(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        """The value as the ORM would send it for this field (a UUID as hex text on SQLite)."""
        return self.output_field.get_db_prep_value(value, connection)


class ListSlot(Slot):
    """A list of values as one parameter: an array on PostgreSQL, a JSON array elsewhere (`AnyOf`)."""

    def db_value(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        values = [self.output_field.get_db_prep_value(item, connection) for item in value]
        return values if connection.vendor == "postgresql" else json.dumps(values)


class AnyOf(models.Expression):
    """`field IN (values)` with the values in one parameter, so that the statement's text, and its
    prepared plan, stay the same however many there are."""

    conditional = True
    output_field = models.BooleanField()

    def __init__(self, field: str, values: ListSlot) -> None:
        super().__init__()
        self.column, self.values = models.F(field), values

    def get_source_expressions(self) -> list:
        return [self.column, self.values]

    def set_source_expressions(self, exprs: list) -> None:
        self.column, self.values = exprs

    def _sides(self, compiler, connection: BaseDatabaseWrapper) -> tuple[str, str, list]:
        field, field_params = compiler.compile(self.column)
        values, values_params = compiler.compile(self.values)
        return field, values, [*field_params, *values_params]

    def as_sql(self, compiler, connection: BaseDatabaseWrapper) -> tuple[str, list]:
        field, values, params = self._sides(compiler, connection)
        return f"{field} IN (SELECT value FROM json_each({values}))", params

    def as_postgresql(self, compiler, connection: BaseDatabaseWrapper) -> tuple[str, list]:
        field, values, params = self._sides(compiler, connection)
        return f"{field} = ANY({values}::{self.column.output_field.db_type(connection)}[])", params


class _Compiled:
    """One connection's SQL for a queryset, the slots' places in its parameters, and how its rows become
    instances (read from the compiler as `ModelIterable` reads them)."""

    def __init__(self, queryset: models.QuerySet, db: BaseDatabaseWrapper) -> None:
        compiler = queryset.query.get_compiler(connection=db)
        self.sql, params = compiler.as_sql()  # what `query.sql_with_params()` returns, on this connection
        self.params = list(params)
        self.slots = [(index, param) for index, param in enumerate(params) if isinstance(param, Slot)]
        self.compiler, self.connection = compiler, db
        select, klass_info = compiler.select, compiler.klass_info
        self.converters = compiler.get_converters([column[0] for column in select[: compiler.col_count]])
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.model_columns = slice(fields[0], fields[-1] + 1)
        self.attnames = [column[0].target.attname for column in select[self.model_columns]]
        self.related = get_related_populators(klass_info, select, db.alias)
        self.annotations = list(compiler.annotation_col_map.items())

    def bind(self, values: dict[str, Any], db: BaseDatabaseWrapper) -> list:
        params = list(self.params)
        for index, slot in self.slots:
            params[index] = slot.db_value(values[slot.name], db)
        return params

    def instance(self, row: tuple, db: BaseDatabaseWrapper) -> models.Model:
        if self.converters:
            row = next(iter(self.compiler.apply_converters([row], self.converters)))
        instance = self.model.from_db(db.alias, self.attnames, row[self.model_columns])
        for related in self.related:
            related.populate(row, instance)
        for name, position in self.annotations:
            setattr(instance, name, row[position])
        return instance


class CompiledQuery:
    """`build()` compiled once per database connection (its SQL depends on the backend, and converters
    are bound to their connection), run with the slots' values: `first(run_id=..., ...)`.

    Django keeps one connection per thread, so the compiled query is kept per thread too: it goes with
    the thread, as the connection does, instead of outliving it in a table keyed by connection."""

    def __init__(self, build: Callable[[], models.QuerySet]) -> None:
        self.build = build
        self._per_thread = threading.local()

    def _compiled(self, db: BaseDatabaseWrapper) -> _Compiled:
        found = getattr(self._per_thread, "compiled", None)
        if found is None or found.connection is not db:
            found = self._per_thread.compiled = _Compiled(self.build(), db)
        return found

    def sql(self) -> str:
        """The statement's text on this thread's connection, `%s` where the values go."""
        return self._compiled(connections[DEFAULT_DB_ALIAS]).sql

    def first(self, **values: Any) -> models.Model | None:
        """The first row's instance, with its select_related objects and annotations; None without one."""
        db = connections[DEFAULT_DB_ALIAS]
        compiled = self._compiled(db)
        with hot_cursor(db) as cursor:
            cursor.execute(compiled.sql, compiled.bind(values, db))
            row = cursor.fetchone()
        return None if row is None else compiled.instance(row, db)


__all__ = ["AnyOf", "CompiledQuery", "ListSlot", "Slot"]
