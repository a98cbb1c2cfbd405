"""The answers of Airlock's built-in tools (their manifests: runs/builtin_tools.py).

`find_tools` and `describe_tool`: discovery the model does itself; `describe_result`, which gives back in full
a result the run's context budget replaced by a summary (runs/context_budget.py). A model given only the
first two searches short summaries, then loads the one definition it needs. They go through the gate like
any skill (arguments validated, a policy verdict, rate limits, the call and its spans on the run's trace);
only the grant check is theirs alone: they need none, because they answer strictly within what the run may
call now (runs/tool_list.py), from the run's pinned snapshot. A result can never name a skill the agent
could not call.

`human.ask` is the one built-in that waits for a person: its manifest requires approval, so the kernel's
verdict is confirm (or a policy's deny), it reaches the routed approvers as a request, and the person's
answer, given instead of an approval, is its result when the worker resumes it (approvals.questions.with_answer).
"""

from __future__ import annotations

import re

from django.utils import timezone

from registry.definitions import RENDERERS, skill_name_for_tool, tool_name_for
from registry.discovery import SearchFilters, search_skills
from registry.snapshots import SnapshotIndex, index_for
from runs import context_budget, gate_cache, tool_list
from runs.adapters import AdapterResult, InvocationContext, register_scheme
from runs.builtin_tools import (
    ANSWER,
    DEFAULT_LIMIT,
    DESCRIBE_RESULT,
    FIND_TOOLS,
    HUMAN_ASK,
    SUMMARY_CHARS,
)
from runs.errors import CallError, NotFound
from runs.execution import Outcome
from runs.models import Run


def answer(name: str, arguments: dict, *, run: Run, index: SnapshotIndex, callable_entries: list[dict]) -> dict:
    """The content of a validated meta-tool call (raises NotFound for a tool the run may not call)."""
    if name == FIND_TOOLS:
        return _find(arguments, run=run, index=index, callable_entries=callable_entries)
    if name == DESCRIBE_RESULT:
        return context_budget.describe(arguments["ref"], run=run)
    return _describe(arguments, callable_entries=callable_entries)


def _find(arguments: dict, *, run: Run, index: SnapshotIndex, callable_entries: list[dict]) -> dict:
    filters = SearchFilters(
        effects=frozenset(arguments.get("effect") or ()),
        data_classes=frozenset(arguments.get("data_class") or ()),
        names=frozenset(entry["name"] for entry in callable_entries),
    )
    found = search_skills(
        agent=run.agent,
        index=index,
        query=arguments["query"],
        namespace=arguments.get("namespace", ""),
        limit=arguments.get("limit", DEFAULT_LIMIT),
        filters=filters,
    )
    return {
        "results": [_summary(entry) for entry in found.results],
        "snapshot": index.number,
        "fallback": found.fallback,
        "hint": "Call describe_tool with a result's name for its full definition."
        if found.results
        else "Nothing you may call matches; try other words, or fewer filters.",
    }


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= SUMMARY_CHARS else sentence[: SUMMARY_CHARS - 1].rstrip() + "…"


def _summary(entry: dict) -> dict:
    manifest = entry["manifest"]
    return {
        "name": entry["name"],
        "tool_name": tool_name_for(entry["name"]),
        "version": entry["version"],
        "summary": _first_sentence(manifest.get("description", "")),
        "effect": entry["effect"],
        "data_classification": entry["data_classification"],
        "approval": (manifest.get("risk") or {}).get("approval"),
    }


def _describe(arguments: dict, *, callable_entries: list[dict]) -> dict:
    asked = arguments["name"]
    name = asked if "." in asked else skill_name_for_tool(asked)
    entry = next((entry for entry in callable_entries if entry["name"] == name), None)
    if entry is None:  # unknown, ungranted, retired and another tenant's skill all read the same
        raise NotFound(
            f"There is no tool {asked} you may call in this run; search with {FIND_TOOLS}.", code="unknown_tool"
        )
    fmt = arguments.get("format", "openai")
    return {
        **_summary(entry),
        "format": fmt,
        "definition": RENDERERS[fmt](entry),
        # The error codes the tool declares: what each means and whether retrying can help.
        "errors": [
            {"code": e["code"], "meaning": e["meaning"], "retryable": e["retryable"]}
            for e in entry["manifest"].get("errors") or []
        ],
    }


class MetaToolAdapter:
    """`airlock:find_tools` and `airlock:describe_tool` outside the gate's own request (an approved call that a
    policy held for a person, resumed by the worker): the run and what it may call are read afresh."""

    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult:
        if manifest["name"] == HUMAN_ASK:  # the person is the tool: the approved arguments carry their answer
            return AdapterResult(content={ANSWER: arguments[ANSWER]})
        run = Run.objects.select_related("snapshot", "agent__tenant", "tenant").get(pk=context.run_id)
        index = index_for(run.snapshot)
        content = answer(
            manifest["name"],
            arguments,
            run=run,
            index=index,
            callable_entries=tool_list.callable_entries(run, index=index),
        )
        return AdapterResult(content=content)


register_scheme("airlock:", MetaToolAdapter())


def execute_inline(
    name: str,
    arguments: dict,
    *,
    run: Run,
    index: SnapshotIndex,
    grants: list[tuple[str, list[str]]],
    generation: gate_cache.Generation,
) -> Outcome:
    """The gate's own answer, in its request: what it already loaded for the batch is reused."""
    outcome = Outcome(started_at=timezone.now())
    try:
        entries = tool_list.callable_entries(run, index=index, grants=grants, generation=generation)
        outcome.content = answer(name, arguments, run=run, index=index, callable_entries=entries)
    except CallError as exc:
        outcome.error = exc
    outcome.finished_at = timezone.now()
    return outcome
