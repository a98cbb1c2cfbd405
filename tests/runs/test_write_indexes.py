"""Every index of a table the gate writes on every call is one more write per call: none of them may be
one another index already covers (its columns a leading part of the other's), unless it enforces
uniqueness."""

import pytest
from django.db import connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

WRITTEN_ON_EVERY_CALL = ("runs_toolcall", "traces_span")


def _indexes(table: str) -> list[tuple[str, bool, tuple[str, ...], str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisunique,
                   array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n),
                   pg_get_indexdef(i.indexrelid)
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = %s::regclass
            """,
            [table],
        )
        return [(name, unique, tuple(columns), definition) for name, unique, columns, definition in cursor.fetchall()]


@pytest.mark.parametrize("table", WRITTEN_ON_EVERY_CALL)
def test_no_index_of_a_table_written_per_call_is_covered_by_another(table):
    indexes = _indexes(table)
    covered = [
        (name, other)
        for name, unique, columns, definition in indexes
        for other, _, other_columns, other_definition in indexes
        if other != name
        and not unique
        and " WHERE " not in definition  # a partial index serves its own queries
        and " WHERE " not in other_definition
        and other_columns[: len(columns)] == columns
    ]
    assert not covered, f"{table}: indexes covered by another: {covered}"
