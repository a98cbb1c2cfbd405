"""Reads of recorded runs and calls that the layers below ask for through their hooks
(policies.hooks, traces.hooks); connected in runs.apps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runs.models import Run, ToolCall


def recorded_calls():
    """Every call that got a verdict, with its run (policies.hooks.recorded_calls)."""
    return ToolCall.objects.exclude(verdict="").select_related("run")


def runs_by_id(tenant_id: Any, ids: list) -> list[Run]:
    """A tenant's runs with these ids (traces.hooks.runs_by_id)."""
    return list(Run.objects.filter(tenant_id=tenant_id, id__in=ids))


def call_pks(run_ids: Iterable, call_ids: Iterable) -> dict[tuple[Any, str], int]:
    """(run_id, call_id) → ToolCall pk (traces.hooks.call_pks)."""
    rows = ToolCall.objects.filter(run_id__in=set(run_ids), call_id__in=set(call_ids))
    return {(run_id, call_id): pk for pk, run_id, call_id in rows.values_list("pk", "run_id", "call_id")}
