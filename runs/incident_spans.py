"""Incident controls on the traces they touch: a suspension or a freeze (and their lifting) appears as a
span on every open run of the agent or the tenant, next to the calls it refused or held."""

from __future__ import annotations

from console.models import Agent, OperatorAction
from runs.lifecycle import RUN_CLOSED
from runs.models import Run
from traces.recording import record_span_safely

OPEN_RUNS_MARKED = 500  # a tenant-wide freeze marks at most this many open runs, newest first


def mark_open_runs(*, action: OperatorAction, agent: Agent | None) -> None:
    runs = Run.objects.filter(tenant_id=action.tenant_id).exclude(status__in=RUN_CLOSED)
    if agent is not None:
        runs = runs.filter(agent=agent)
    name = f"{action.get_action_display().lower()} by {action.actor_label}"
    attributes = {"airlock.operator.action": action.action, "airlock.operator.by": action.actor_label}
    if action.reason:
        attributes["airlock.operator.reason"] = action.reason
    for run in runs.order_by("-created_at")[:OPEN_RUNS_MARKED]:
        record_span_safely(
            what="an incident control's span",
            run=run,
            kind="run",
            name=name,
            started_at=action.created_at,
            ended_at=action.created_at,
            outcome=action.action,
            attributes=attributes,
        )
