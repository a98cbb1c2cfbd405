"""Model rows in hand-written SQL, for the few statements on the gate's hot path.

Building a queryset costs more Python than the database needs to answer it (about a millisecond and a
half per query with joins and subqueries, on a small CPU). The gate's hot statements are therefore
written once, from the models' own metadata, and their rows are turned back into model instances the
way Django's ORM does it: the same column order, database converters and `Model.from_db`. Writes go the
other way through each field's `pre_save` and `get_db_prep_save`, as Django's INSERT compiler does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper


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

    def placeholders(self, connection: BaseDatabaseWrapper) -> str:
        """`(%s::type, ...)` for one row: typed, so the row also reads right inside a VALUES list."""
        return "(" + ", ".join(f"%s::{_cast_type(f, connection)}" for f in self.fields) + ")"

    def params(self, connection: BaseDatabaseWrapper, instance: models.Model) -> list[Any]:
        return [f.get_db_prep_save(f.pre_save(instance, add=True), connection) for f in self.fields]


def _cast_type(field: models.Field, connection: BaseDatabaseWrapper) -> str:
    """The column's type without a length: an explicit cast to varchar(16) would silently cut a longer
    value, where the INSERT must refuse it as the ORM's would."""
    db_type = field.cast_db_type(connection)
    return db_type.split("(", 1)[0] if db_type.startswith(("varchar(", "character varying(")) else db_type


__all__ = ["Columns", "InsertColumns", "quoted"]
