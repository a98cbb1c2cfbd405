"""Model-facing tool definitions, exactly as each provider expects them.

OpenAI and Anthropic tool names allow only [A-Za-z0-9_-]{1,64}, so a skill's dots become "__"
(skill names never contain "__", so the mapping is reversible: `skill_name_for_tool`). MCP
allows dots and keeps the skill name.
"""

from __future__ import annotations

from airlock_sdk.results import PAGE_ARGUMENT, VIEW_ARGUMENT  # offered by skills with views or pages

FORMATS = ("openai", "anthropic", "mcp")


def tool_name_for(skill_name: str) -> str:
    return skill_name.replace(".", "__")


def skill_name_for_tool(tool_name: str) -> str:
    return tool_name.replace("__", ".")


def _views(manifest: dict) -> list[str]:
    views = (manifest.get("output_views") or {}).get("views")
    return sorted(views) if isinstance(views, dict) else []  # jsonb keeps no key order


def description_for(manifest: dict) -> str:
    """The skill's description, and what the model may ask of its result."""
    text = manifest["description"]
    views = _views(manifest)
    if views:
        default = (manifest.get("output_views") or {}).get("default") or views[0]
        text += f" Result views: {', '.join(views)} (default {default}); ask for another with {VIEW_ARGUMENT}."
    return text


def parameters_for(manifest: dict) -> dict:
    """The input schema, plus the view and page arguments of a skill that declares views or pages (any cut
    result's `next` works through PAGE_ARGUMENT; the definitions of other skills stay as their owners wrote them)."""
    schema = manifest["input_schema"]
    views = _views(manifest)
    declared = views or manifest.get("pagination")
    if not declared or not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return schema
    extra: dict = {
        PAGE_ARGUMENT: {
            "type": "string",
            "description": "The `next` value of an earlier result of this tool, to get its next page.",
        }
    }
    if views:
        extra[VIEW_ARGUMENT] = {"type": "string", "enum": views, "description": "Which view of the result to return."}
    return {**schema, "properties": {**(schema.get("properties") or {}), **extra}}


def openai_definition(entry: dict) -> dict:
    """A function tool for the OpenAI Responses API."""
    manifest = entry["manifest"]
    return {
        "type": "function",
        "name": tool_name_for(entry["name"]),
        "description": description_for(manifest),
        "parameters": parameters_for(manifest),
        "strict": False,
    }


def anthropic_definition(entry: dict) -> dict:
    manifest = entry["manifest"]
    return {
        "name": tool_name_for(entry["name"]),
        "description": description_for(manifest),
        "input_schema": parameters_for(manifest),
    }


def mcp_definition(entry: dict) -> dict:
    """An MCP Tool, with behaviour annotations derived from the declared risk."""
    manifest = entry["manifest"]
    risk, execution = manifest.get("risk", {}), manifest.get("execution", {})
    effect = risk.get("effect")
    return {
        "name": entry["name"],
        "title": entry["name"].rsplit(".", 1)[-1].replace("_", " ").capitalize(),
        "description": description_for(manifest),
        "inputSchema": parameters_for(manifest),
        "outputSchema": manifest["output_schema"],
        "annotations": {
            "readOnlyHint": effect == "read",
            "destructiveHint": effect == "destructive",
            "idempotentHint": effect == "read" or bool(execution.get("idempotent")),
            "openWorldHint": effect == "external" or bool(risk.get("untrusted_output")),
        },
    }


RENDERERS = {"openai": openai_definition, "anthropic": anthropic_definition, "mcp": mcp_definition}


def definitions_for(entries: list[dict], fmt: str) -> list[dict]:
    if fmt not in RENDERERS:
        raise ValueError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    return [RENDERERS[fmt](entry) for entry in entries]
