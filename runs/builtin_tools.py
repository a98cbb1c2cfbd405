"""Airlock's built-in tools as skills: their manifests and how a call's name resolves to one.

`find_tools`, `describe_tool` and `describe_result` are answered by runs/meta_tools.py; `human.ask` waits for a
person (approvals/questions.py). Names without a namespace, and the namespace `human`, are reserved for them
(registry.namespaces.RESERVED_NAMESPACES). This module imports nothing of the gate, so the gate and
runs.authorization both resolve names through it.
"""

from __future__ import annotations

from registry.definitions import FORMATS
from registry.models import DataClassification, Effect
from registry.snapshots import ResolvedSkill, SnapshotIndex
from registry.stages import Audience
from runs import context_budget
from runs.models import Run

FIND_TOOLS = "find_tools"
DESCRIBE_TOOL = "describe_tool"
DESCRIBE_RESULT = "describe_result"
HUMAN_ASK = "human.ask"
ANSWER = "answer"  # the argument the person's answer fills in (approvals.questions)
MAX_CHOICES, MAX_CHOICE_CHARS, MAX_QUESTION_CHARS = 10, 200, 2000
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


def _manifest(
    name: str, description: str, input_schema: dict, output_schema: dict, *, risk: dict | None = None
) -> dict:
    return {
        "skill_id": f"skl_airlock_{name.replace('.', '_')}",
        "name": name,
        "version": VERSION,
        "description": description,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "risk": {"effect": Effect.READ, **(risk or {})},
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
    HUMAN_ASK: _manifest(
        HUMAN_ASK,
        "Ask a person a question and wait for the answer: the approvers of your tenant see it in their inbox. "
        "Give choices when the answer is one of a few; the result is the person's answer.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["question"],
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                    "description": "The question, as the person should read it.",
                },
                "choices": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": MAX_CHOICES,
                    "uniqueItems": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_CHOICE_CHARS},
                    "description": "The answers the person picks from; leave out for a free answer.",
                },
                ANSWER: {
                    "type": "string",
                    "maxLength": MAX_QUESTION_CHARS,
                    "description": "Leave out: Airlock puts the person's answer here (whatever you send is replaced).",
                },
            },
        },
        {"type": "object", "required": [ANSWER], "properties": {ANSWER: {"type": "string"}}},
        risk={"approval": "required"},
    ),
}

# What /api/v1/tools offers for progressive disclosure, in the shape of a snapshot entry.
ENTRIES = [
    {
        "name": name,
        "namespace": name.rsplit(".", 1)[0] if "." in name else "",
        "version": VERSION,
        "effect": Effect.READ,
        "data_classification": DataClassification.INTERNAL,
        "manifest": manifest,
    }
    for name, manifest in MANIFESTS.items()
]


def is_meta(name: str) -> bool:
    return name in MANIFESTS


def answered_inline(name: str) -> bool:
    """The built-ins the gate answers in its own request; `human.ask` waits for a person instead."""
    return name in MANIFESTS and name != HUMAN_ASK


def asks_a_person(name: str) -> bool:
    return name == HUMAN_ASK


def resolved(name: str, version: str | None) -> ResolvedSkill | None:
    """The meta tool as the gate resolves a skill; None for any other name or version."""
    manifest = MANIFESTS.get(name)
    if manifest is None or version not in (None, VERSION):
        return None
    return ResolvedSkill(
        skill_version_id=None,
        skill_id=manifest["skill_id"],
        name=name,
        namespace=name.rsplit(".", 1)[0] if "." in name else "",
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


def resolve(name: str, version: str | None, *, run: Run, index: SnapshotIndex) -> ResolvedSkill | None:
    """What a call's name means in a run: a built-in first, else the skill its snapshot resolves for this
    audience. The gate and every recorded call about to act (runs.authorization.recorded_skill) ask this."""
    return resolved(name, version) or index.resolve(name, version, audience=Audience.of_run(run))
