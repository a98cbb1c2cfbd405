"""A batch's new calls, their spans and the trace's counters in one PostgreSQL statement.

The ORM writes a read batch in six round trips (BEGIN, the calls, a savepoint, the spans, the trace's
counters, COMMIT). Here one data-modifying WITH statement does it: it is atomic on its own, so the
answer the agent gets is only sent after all of it is committed (a web worker killed right after it
answered loses nothing). A span row finds its new call by the call id, unique in the run.

`write` returns False, having changed nothing, when the batch needs more than this statement covers or
the statement fails; runs.recording then writes it the ordinary way, where a failure to store spans
does not fail the batch.
"""

from __future__ import annotations

import contextlib
import functools
import logging

from django.db import DatabaseError, connection, transaction

from lib.sql_rows import InsertColumns, hot_cursor, quoted
from runs.models import Run, ToolCall
from traces.models import Span
from traces.recording import counter_deltas, trace_counter_update

logger = logging.getLogger(__name__)


class _Statement:
    def __init__(self) -> None:
        self.calls = InsertColumns(ToolCall)
        self.spans = InsertColumns(Span)
        self.span_call = [f.name for f in self.spans.fields].index("call")
        q = functools.partial(quoted, connection)
        self.pk, self.call_id = q(ToolCall._meta.pk.column), q("call_id")
        self.call_insert = f"INSERT INTO {q(ToolCall._meta.db_table)} ({self.calls.names(connection)}) VALUES "
        self.call_row = self.calls.placeholders()
        self.span_insert = f"INSERT INTO {q(Span._meta.db_table)} ({self.spans.names(connection)}) VALUES "
        span_row = ["%s"] * len(self.spans.fields)
        # A span of a call stored earlier names it; one of a new call finds it by its call id, unique in the run.
        span_row[self.span_call] = f"COALESCE(%s, (SELECT {self.pk} FROM new_calls WHERE {self.call_id} = %s))"
        self.span_row = "(" + ", ".join(span_row) + ")"

    def sql(self, calls: int, spans: int, counters: str) -> str:
        if calls:
            rows = ", ".join([self.call_row] * calls)
            parts = [f"new_calls AS ({self.call_insert}{rows} RETURNING {self.pk}, {self.call_id})"]
        else:
            parts = [f"new_calls AS (SELECT NULL::bigint AS {self.pk}, NULL::varchar AS {self.call_id} WHERE false)"]
        if spans:
            parts.append(f"new_spans AS ({self.span_insert}{', '.join([self.span_row] * spans)} RETURNING 1)")
            parts.append(f"counters AS ({counters} RETURNING 1)")
        return f"WITH {', '.join(parts)} SELECT {self.call_id}, {self.pk} FROM new_calls"

    def execute(self, calls: list[ToolCall], spans: list[Span]) -> dict[str, int]:
        """The new calls' ids by call id, once the statement has committed (or its savepoint released)."""
        params: list = []
        for call in calls:
            params += self.calls.params(connection, call)
        for span in spans:
            row = self.spans.params(connection, span)
            new_call = span.call is not None and span.call.pk is None
            row[self.span_call : self.span_call + 1] = [
                None if new_call else row[self.span_call],
                span.call.call_id if new_call else None,
            ]
            params += row
        counters = ""
        if spans:
            counters, counter_params = trace_counter_update(connection, spans[0].trace.pk, counter_deltas(spans))
            params += counter_params
        own_savepoint = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
        with own_savepoint, hot_cursor(connection) as cursor:  # outside a transaction the statement commits itself
            cursor.execute(self.sql(len(calls), len(spans), counters), params)
            return dict(cursor.fetchall())


@functools.cache
def _statement() -> _Statement:
    return _Statement()


def write(*, run: Run, new_calls: list[ToolCall], spans: list[Span]) -> bool:
    """Store the batch's new calls and spans and move the trace's counters, all or nothing; True if done."""
    if connection.vendor != "postgresql" or not (new_calls or spans):
        return False
    try:
        ids = _statement().execute(new_calls, spans)
    except DatabaseError:
        logger.warning(
            "Writing the batch of run %s in one statement failed; writing it again the ordinary way",
            run.pk,
            exc_info=True,
        )
        return False
    for call in new_calls:
        call.pk = ids[call.call_id]
        call._state.adding, call._state.db = False, connection.alias
    return True


__all__ = ["write"]
