"""Model-facing tool definitions, exactly as each provider expects them.

OpenAI and Anthropic tool names allow only [A-Za-z0-9_-]{1,64}, so a skill's dots become "__"
(skill names never contain "__", so the mapping is reversible: `skill_name_for_tool`). MCP
allows dots and keeps the skill name.
"""

from __future__ import annotations

FORMATS = ("openai", "anthropic", "mcp")


def tool_name_for(skill_name: str) -> str:
    return skill_name.replace(".", "__")


def skill_name_for_tool(tool_name: str) -> str:
    return tool_name.replace("__", ".")


def openai_definition(entry: dict) -> dict:
    """A function tool for the OpenAI Responses API."""
    manifest = entry["manifest"]
    return {
        "type": "function",
        "name": tool_name_for(entry["name"]),
        "description": manifest["description"],
        "parameters": manifest["input_schema"],
        "strict": False,
    }


def anthropic_definition(entry: dict) -> dict:
    manifest = entry["manifest"]
    return {
        "name": tool_name_for(entry["name"]),
        "description": manifest["description"],
        "input_schema": manifest["input_schema"],
    }


def mcp_definition(entry: dict) -> dict:
    """An MCP Tool, with behaviour annotations derived from the declared risk."""
    manifest = entry["manifest"]
    risk, execution = manifest.get("risk", {}), manifest.get("execution", {})
    effect = risk.get("effect")
    return {
        "name": entry["name"],
        "title": entry["name"].rsplit(".", 1)[-1].replace("_", " ").capitalize(),
        "description": manifest["description"],
        "inputSchema": manifest["input_schema"],
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
