"""One query that authenticates the agent and loads everything the gate needs about its run.

`POST /runs/{id}/calls` is the hot path. Its key check, the run (with its agent and tenant, read live:
a revoked agent is refused on its next call), the gate generation (runs/gate_cache.py), whether any
call id or idempotency key of the batch was seen before, and the run's trace are one SELECT. Anything
unusual (no such run for this key, a wrong key, a revoked agent, not an agent key at all) falls back to
the ordinary DRF authentication and run lookup, which answer exactly as every other endpoint does.
"""

from __future__ import annotations

from django.db.models import Exists, F, OuterRef, Subquery
from rest_framework.request import Request

from console.api_auth import sign_in_agent, well_formed_agent_key
from console.models import GateGeneration
from runs.gate import Preloaded, replay_lookups
from runs.models import IdempotencyRecord, Run, ToolCall
from traces.models import Trace
from traces.recording import adopt_trace


def authenticated_run(request: Request, run_id) -> tuple[Run, Preloaded] | None:
    """The run of the agent whose key the request carries, signed in; None to take the ordinary path."""
    presented = well_formed_agent_key(request)
    if presented is None:
        return None
    lookup, key = presented
    calls = request.data.get("calls") if isinstance(request.data, dict) else None
    call_ids, keys = replay_lookups(run_id, calls if isinstance(calls, list) else [])
    generation = GateGeneration.objects.filter(pk=1)
    run = (
        Run.objects.filter(pk=run_id, agent__key_lookup=lookup, tenant_id=F("agent__tenant_id"))
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
    if run is None or not run.agent.key_matches(key) or run.agent.is_revoked:
        return None
    run.agent.tenant = run.tenant
    sign_in_agent(request, run.agent)
    if run.trace_pk is not None:
        adopt_trace(run, run.trace_pk)
    generation_key = (run.gate_epoch, run.gate_number) if run.gate_epoch is not None else None
    return run, Preloaded(generation=generation_key, prior_calls=run.prior_calls, prior_keys=run.prior_keys)
