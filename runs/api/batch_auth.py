"""One query that authenticates the agent and loads everything the gate needs about its run.

`POST /runs/{id}/calls` is the hot path. Its key check, the run (with its agent and tenant, read live:
a revoked agent is refused on its next call), the gate generation (runs/gate_cache.py), whether any
call id or idempotency key of the batch was seen before, and the run's trace are one SELECT. On
PostgreSQL that SELECT is written once by hand (lib/sql_rows.py: building the equivalent queryset cost
more than the database took to answer it); on SQLite the same query is built by the ORM. Anything
unusual (no such run for this key, a wrong key, a revoked agent, a replaced key past its grace period,
not an agent key at all) falls back to the ordinary DRF authentication and run lookup, which answer
exactly as every other endpoint does.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Subquery
from rest_framework.request import Request

from console.api_auth import sign_in_agent, well_formed_agent_key
from console.models import Agent, GateGeneration, Tenant
from lib import clock
from lib.sql_rows import Columns, hot_cursor, quoted
from registry.models import Snapshot
from runs.gate import Preloaded, replay_lookups
from runs.models import IdempotencyRecord, Run, ToolCall
from traces.models import Trace
from traces.recording import adopt_trace


def authenticated_run(request: Request, run_id) -> tuple[Run, Preloaded] | None:
    """The run of the agent whose key (current, or previous within its grace period) the request carries,
    signed in; None to take the ordinary path."""
    presented = well_formed_agent_key(request)
    if presented is None:
        return None
    lookup, key = presented
    calls = request.data.get("calls") if isinstance(request.data, dict) else None
    call_ids, keys = replay_lookups(run_id, calls if isinstance(calls, list) else [])
    load = _load_postgresql if connection.vendor == "postgresql" else _load_orm
    loaded = load(run_id, lookup, call_ids, sorted(keys))
    if loaded is None:
        return None
    run, extras = loaded
    if run.agent.key_standing(key, clock.now()) not in ("current", "previous") or run.agent.is_revoked:
        return None
    run.agent.tenant = run.tenant
    sign_in_agent(request, run.agent, lookup)
    if extras["trace_pk"] is not None:
        adopt_trace(run, extras["trace_pk"])
    epoch = extras["gate_epoch"]
    return run, Preloaded(
        generation=(epoch, extras["gate_number"]) if epoch is not None else None,
        prior_calls=bool(extras["prior_calls"]),
        prior_keys=bool(extras["prior_keys"]),
    )


EXTRAS = ("gate_epoch", "gate_number", "prior_calls", "prior_keys", "trace_pk")


def _load_orm(run_id, lookup: str, call_ids: list[str], keys: list[str]) -> tuple[Run, dict[str, Any]] | None:
    generation = GateGeneration.objects.filter(pk=1)
    run = (
        Run.objects.of_agent_key(lookup)
        .filter(pk=run_id)
        .select_related("agent", "tenant", "snapshot")
        .defer("snapshot__body")  # the snapshot index is cached per process; the body is read on a miss
        .annotate(
            gate_epoch=Subquery(generation.values("epoch")),
            gate_number=Subquery(generation.values("number")),
            prior_calls=Exists(ToolCall.objects.filter(run_id=OuterRef("pk"), call_id__in=call_ids)),
            prior_keys=Exists(IdempotencyRecord.objects.filter(tenant_id=OuterRef("tenant_id"), key__in=keys)),
            trace_pk=Subquery(Trace.objects.filter(run_id=OuterRef("pk")).values("pk")[:1]),
        )
        .first()
    )
    if run is None:
        return None
    return run, {name: getattr(run, name) for name in EXTRAS}


class _RunQuery:
    """The ORM query above, as one PostgreSQL statement: run, agent, tenant, snapshot (without its body)
    and the extras, for one run id and key lookup; call ids and keys are arrays, so the text is fixed."""

    def __init__(self) -> None:
        self.parts = [
            Columns(Run, "r"),
            Columns(Agent, "a"),
            Columns(Tenant, "tn"),
            Columns(Snapshot, "s", defer=["body"]),
        ]
        table = functools.partial(quoted, connection)
        column = functools.partial(quoted, connection)
        run_pk, agent_fk, tenant_fk, snapshot_fk = (
            column(Run._meta.pk.column),
            column(Run._meta.get_field("agent").column),
            column(Run._meta.get_field("tenant").column),
            column(Run._meta.get_field("snapshot").column),
        )
        self.sql = f"""
            SELECT {", ".join(part.select(connection) for part in self.parts)},
                g.{column("epoch")}, g.{column("number")},
                EXISTS (SELECT 1 FROM {table(ToolCall._meta.db_table)} c
                        WHERE c.{column(ToolCall._meta.get_field("run").column)} = r.{run_pk}
                          AND c.{column("call_id")} = ANY(%(call_ids)s::varchar[])),
                EXISTS (SELECT 1 FROM {table(IdempotencyRecord._meta.db_table)} i
                        WHERE i.{column(IdempotencyRecord._meta.get_field("tenant").column)} = r.{tenant_fk}
                          AND i.{column("key")} = ANY(%(keys)s::varchar[])),
                (SELECT t.{column(Trace._meta.pk.column)} FROM {table(Trace._meta.db_table)} t
                 WHERE t.{column(Trace._meta.get_field("run").column)} = r.{run_pk} LIMIT 1)
            FROM {table(Run._meta.db_table)} r
            JOIN {table(Agent._meta.db_table)} a ON a.{column(Agent._meta.pk.column)} = r.{agent_fk}
                AND a.{column(Agent._meta.get_field("tenant").column)} = r.{tenant_fk}
            JOIN {table(Tenant._meta.db_table)} tn ON tn.{column(Tenant._meta.pk.column)} = r.{tenant_fk}
            JOIN {table(Snapshot._meta.db_table)} s ON s.{column(Snapshot._meta.pk.column)} = r.{snapshot_fk}
            LEFT JOIN {table(GateGeneration._meta.db_table)} g ON g.{column(GateGeneration._meta.pk.column)} = 1
            WHERE r.{run_pk} = %(run_id)s
              AND (a.{column("key_lookup")} = %(lookup)s OR a.{column("previous_key_lookup")} = %(lookup)s)
        """

    def load(self, run_id, lookup: str, call_ids: list[str], keys: list[str]) -> tuple[Run, dict[str, Any]] | None:
        with hot_cursor(connection) as cursor:
            cursor.execute(self.sql, {"run_id": run_id, "lookup": lookup, "call_ids": call_ids, "keys": keys})
            row = cursor.fetchone()
        if row is None:
            return None
        instances, start = [], 0
        for part in self.parts:
            instances.append(part.instance(connection, row[start : start + len(part)]))
            start += len(part)
        run, agent, tenant, snapshot = instances
        run.agent, run.tenant, run.snapshot = agent, tenant, snapshot
        return run, dict(zip(EXTRAS, row[start:], strict=True))


@functools.cache
def _run_query() -> _RunQuery:
    return _RunQuery()


def _load_postgresql(run_id, lookup: str, call_ids: list[str], keys: list[str]) -> tuple[Run, dict[str, Any]] | None:
    return _run_query().load(run_id, lookup, call_ids, keys)
