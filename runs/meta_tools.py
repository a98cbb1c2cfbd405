"""`find_tools` and `describe_tool`: discovery the model does itself, as two tools every agent may call;
and `describe_result`, which gives back in full a result the run's context budget replaced by a summary
(runs/context_budget.py).

A model given only these two searches short summaries, then loads the one definition it needs. Both go
through the gate like any skill (arguments validated, a policy verdict, rate limits, the call and its
spans on the run's trace); only the grant check is theirs alone: they need none, because they answer
strictly within what the run may call now (runs/tool_list.py), from the run's pinned snapshot. A result
can never name a skill the agent could not call.

Names without a namespace are reserved for them: a skill's name is always `namespace.skill`.
"""

from __future__ import annotations

import re

from django.utils import timezone

from registry.definitions import FORMATS, RENDERERS, skill_name_for_tool, tool_name_for
from registry.discovery import SearchFilters, search_skills
from registry.models import DataClassification, Effect
from registry.snapshots import ResolvedSkill, SnapshotIndex, index_for
from runs import context_budget, gate_cache, tool_list
from runs.adapters import AdapterResult, InvocationContext, register_scheme
from runs.errors import CallError, NotFound
from runs.execution import Outcome
from runs.models import Run

FIND_TOOLS = "find_tools"
DESCRIBE_TOOL = "describe_tool"
DESCRIBE_RESULT = "describe_result"
VERSION = "1.0.0"
DEFAULT_LIMIT, MAX_LIMIT = 5, 20
SUMMARY_CHARS = 200

_classes = {"type": "array", "uniqueItems": True, "maxItems": 5}
_SUMMARY = {
    "type": "object",
    "required": ["name", "tool_name", "summary", "effect"],
    "properties": {
        "name": {"type": "string"},
        "tool_name": {"type": "string"},
        "version": {"type": "string"},
        "summary": {"type": "string"},
        "effect": {"type": "string"},
        "data_classification": {"type": "string"},
        "approval": {"type": ["string", "null"]},
    },
}


def _manifest(name: str, description: str, input_schema: dict, output_schema: dict) -> dict:
    return {
        "skill_id": f"skl_airlock_{name}",
        "name": name,
        "version": VERSION,
        "description": description,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "risk": {"effect": Effect.READ},
        "permissions": {"allowed_tenants": ["*"], "allowed_agent_roles": ["*"]},
        "execution": {"adapter": f"airlock:{name}", "timeout_ms": 5000, "idempotent": True},
        "ownership": {"team": "airlock"},
        "data_classification": DataClassification.INTERNAL,
    }


MANIFESTS = {
    FIND_TOOLS: _manifest(
        FIND_TOOLS,
        "Search the tools you may call in this conversation. Returns short summaries, best match first. "
        "Load a result's full definition with describe_tool before you call it.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["query"],
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 300,
                    "description": "What you want to do, in a few words: 'refund an order'.",
                },
                "effect": {
                    **_classes,
                    "items": {"enum": list(Effect.values)},
                    "description": "Only tools with these effects; ['read'] for reads only.",
                },
                "data_class": {
                    **_classes,
                    "items": {"enum": list(DataClassification.values)},
                    "description": "Only tools handling these data classes.",
                },
                "namespace": {"type": "string", "maxLength": 100, "description": "Only this namespace: 'billing'."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
            },
        },
        {
            "type": "object",
            "required": ["results"],
            "properties": {
                "results": {"type": "array", "items": _SUMMARY},
                "snapshot": {"type": "integer"},
                "fallback": {"type": ["string", "null"]},
                "hint": {"type": "string"},
            },
        },
    ),
    DESCRIBE_TOOL: _manifest(
        DESCRIBE_TOOL,
        "The full definition of one tool that find_tools returned: its description, input schema and risk. "
        "Add it to your tools, then call it by its tool_name.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {
                    "type": "string",
                    "minLength": 3,
                    "maxLength": 200,
                    "description": "The tool's name or tool_name, as find_tools gave it.",
                },
                "format": {"enum": list(FORMATS), "default": "openai", "description": "The definition's format."},
            },
        },
        {
            "type": "object",
            "required": ["name", "version", "definition"],
            "properties": {
                "name": {"type": "string"},
                "tool_name": {"type": "string"},
                "version": {"type": "string"},
                "effect": {"type": "string"},
                "data_classification": {"type": "string"},
                "approval": {"type": ["string", "null"]},
                "format": {"type": "string"},
                "definition": {"type": "object"},
                "errors": {"type": "array", "items": {"type": "object"}},
            },
        },
    ),
    DESCRIBE_RESULT: _manifest(
        DESCRIBE_RESULT,
        "The full result of an earlier call of this run that was replaced by a summary to save context. "
        "Pass the ref the summary gave.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["ref"],
            "properties": {
                "ref": {
                    "type": "string",
                    "pattern": context_budget.REF_PATTERN,
                    "description": "The reference id from the summary: 'res_1042'.",
                }
            },
        },
        {
            "type": "object",
            "required": ["ref", "call_id", "name", "content"],
            "properties": {
                "ref": {"type": "string"},
                "call_id": {"type": "string"},
                "name": {"type": "string"},
                "content": {},
                "provenance": {"type": "object"},
            },
        },
    ),
}

# What /api/v1/tools offers for progressive disclosure, in the shape of a snapshot entry.
ENTRIES = [
    {
        "name": name,
        "namespace": "",
        "version": VERSION,
        "effect": Effect.READ,
        "data_classification": DataClassification.INTERNAL,
        "manifest": manifest,
    }
    for name, manifest in MANIFESTS.items()
]


def is_meta(name: str) -> bool:
    return name in MANIFESTS


def resolved(name: str, version: str | None) -> ResolvedSkill | None:
    """The meta tool as the gate resolves a skill; None for any other name or version."""
    manifest = MANIFESTS.get(name)
    if manifest is None or version not in (None, VERSION):
        return None
    return ResolvedSkill(
        skill_version_id=None,
        skill_id=manifest["skill_id"],
        name=name,
        namespace="",
        version=VERSION,
        status="active",
        effect=Effect.READ,
        data_classification=DataClassification.INTERNAL,
        manifest=manifest,
        replacement_name=None,
        deprecated=False,
        owner_team="airlock",
        builtin=True,
    )


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
