"""One query that authenticates the agent and loads everything the gate needs about its run.

`POST /runs/{id}/calls` is the hot path. Its key check, the run (with its agent and tenant, read live:
a revoked agent is refused on its next call), the gate generation (runs/gate_cache.py), whether any
call id or idempotency key of the batch was seen before, and the run's trace are one SELECT, written
once with the ORM and compiled once per connection (lib/compiled_query.py: building the queryset cost
more than the database took to answer it), the same text on SQLite and on PostgreSQL. Anything
unusual (no such run for this key, a wrong key, a revoked agent, a replaced key past its grace period,
not an agent key at all) falls back to the ordinary DRF authentication and run lookup, which answer
exactly as every other endpoint does.
"""

from __future__ import annotations

from django.db.models import CharField, Exists, OuterRef, QuerySet, Subquery, UUIDField
from rest_framework.request import Request

from console.api_auth import sign_in_agent, well_formed_agent_key
from console.models import GateGeneration
from lib import clock
from lib.compiled_query import AnyOf, CompiledQuery, ListSlot, Slot
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
    run = load_run(run_id, lookup, call_ids, sorted(keys))
    if run is None:
        return None
    if run.agent.key_standing(key, clock.now()) not in ("current", "previous") or run.agent.is_revoked:
        return None
    run.agent.tenant = run.tenant
    sign_in_agent(request, run.agent, lookup)
    if run.trace_pk is not None:
        adopt_trace(run, run.trace_pk)
    return run, Preloaded(
        generation=(run.gate_epoch, run.gate_number) if run.gate_epoch is not None else None,
        prior_calls=bool(run.prior_calls),
        prior_keys=bool(run.prior_keys),
    )


def _run_query() -> QuerySet[Run]:
    """The run of the key's agent with its agent, tenant and snapshot (without its body: the snapshot
    index is cached per process and the body read on a miss) and what the gate asks
    beside it, for one run id."""
    generation = GateGeneration.objects.filter(pk=1)
    call_ids, keys = ListSlot("call_ids", CharField()), ListSlot("keys", CharField())
    return (
        Run.objects.of_agent_key(Slot("lookup", CharField()))
        .filter(pk=Slot("run_id", UUIDField()))
        .select_related("agent", "tenant", "snapshot")
        .defer("snapshot__body")
        .annotate(
            gate_epoch=Subquery(generation.values("epoch")),
            gate_number=Subquery(generation.values("number")),
            prior_calls=Exists(ToolCall.objects.filter(AnyOf("call_id", call_ids), run_id=OuterRef("pk"))),
            prior_keys=Exists(IdempotencyRecord.objects.filter(AnyOf("key", keys), tenant_id=OuterRef("tenant_id"))),
            trace_pk=Subquery(Trace.objects.filter(run_id=OuterRef("pk")).values("pk")[:1]),
        )
        .order_by()
    )


RUN_QUERY = CompiledQuery(_run_query)


def load_run(run_id, lookup: str, call_ids: list[str], keys: list[str]) -> Run | None:
    """The run query's one row: the run, its agent, tenant and snapshot, with the gate
    generation (gate_epoch, gate_number), prior_calls, prior_keys and trace_pk as attributes."""
    return RUN_QUERY.first(run_id=run_id, lookup=lookup, call_ids=call_ids, keys=keys)
