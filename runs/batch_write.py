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

from lib.sql_rows import InsertColumns, quoted
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
        self.call_table, self.span_table = q(ToolCall._meta.db_table), q(Span._meta.db_table)
        self.call_names, self.span_names = self.calls.names(connection), self.spans.names(connection)
        self.call_row = self.calls.placeholders(connection)
        self.span_row = self.spans.placeholders(connection)[:-1] + ", %s::varchar)"  # + the call id to join on
        values = [f"v.c{i}" for i in range(len(self.spans.fields))]
        values[self.span_call] = f"COALESCE(v.c{self.span_call}, new_calls.{q(ToolCall._meta.pk.column)})"
        self.span_select = ", ".join(values)
        self.span_alias = ", ".join([f"c{i}" for i in range(len(self.spans.fields))] + ["call_ref"])
        self.pk, self.call_id = q(ToolCall._meta.pk.column), q("call_id")

    def sql(self, calls: int, spans: int, counters: str) -> str:
        parts = []
        if calls:
            parts.append(
                f"new_calls AS (INSERT INTO {self.call_table} ({self.call_names}) "
                f"VALUES {', '.join([self.call_row] * calls)} RETURNING {self.pk}, {self.call_id})"
            )
        else:
            parts.append(
                f"new_calls AS (SELECT NULL::bigint AS {self.pk}, NULL::varchar AS {self.call_id} WHERE false)"
            )
        if spans:
            parts.append(
                f"new_spans AS (INSERT INTO {self.span_table} ({self.span_names}) "
                f"SELECT {self.span_select} FROM (VALUES {', '.join([self.span_row] * spans)}) AS v({self.span_alias}) "
                f"LEFT JOIN new_calls ON new_calls.{self.call_id} = v.call_ref RETURNING 1)"
            )
            parts.append(f"counters AS ({counters} RETURNING 1)")
        return f"WITH {', '.join(parts)} SELECT {self.call_id}, {self.pk} FROM new_calls"

    def execute(self, calls: list[ToolCall], spans: list[Span]) -> dict[str, int]:
        """The new calls' ids by call id, once the statement has committed (or its savepoint released)."""
        params: list = []
        for call in calls:
            params += self.calls.params(connection, call)
        for span in spans:
            row = self.spans.params(connection, span)
            if span.call is not None and span.call.pk is None:  # a new call: its id comes from new_calls
                row[self.span_call] = None
            params += [*row, span.call.call_id if span.call is not None else None]
        counters = ""
        if spans:
            counters, counter_params = trace_counter_update(connection, spans[0].trace.pk, counter_deltas(spans))
            params += counter_params
        own_savepoint = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
        with own_savepoint, connection.cursor() as cursor:  # outside a transaction the statement commits itself
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
