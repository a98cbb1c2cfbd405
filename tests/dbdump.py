"""Every row of every table as one text, for tests that grep the database for what must not be there.

Tables are listed by introspection (all of them, not only those of known models). Strings are
written as they are (a PEM key keeps its newlines), JSON values (dicts on PostgreSQL, text on SQLite)
by their string leaves and keys, bytes decoded, everything else by `repr`.
"""

from collections.abc import Iterator
from typing import Any

from django.db import connection


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes | memoryview):
        yield bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)
    elif value is not None:
        yield repr(value)


def database_text() -> str:
    chunks: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - table names come from introspection
            for row in cursor.fetchall():
                chunks.extend(_texts(row))
    return "\n".join(chunks)
