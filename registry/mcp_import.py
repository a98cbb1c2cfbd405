"""Import an MCP server's tools as draft skills in the `mcp.<server>` namespace.

The tools are listed with the official `mcp` SDK (2.x). Their annotations (readOnlyHint,
destructiveHint, idempotentHint, openWorldHint) only suggest the risk fields: the drafts are
marked unconfirmed and cannot be published until an owner confirms or edits the defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import shlex
from dataclasses import dataclass
from typing import Any

from console.models import Team
from lib import egress
from lib.tool_descriptions import definition_of, findings
from registry.contracts import effect_of_annotations
from registry.models import Skill, SkillVersion
from registry.services import ManifestInvalid, create_draft_version


@dataclass
class ListedTools:
    server_name: str
    tools: list[dict]


def _client_target(target: Any) -> Any:
    # The mcp SDK takes about a second to import: loaded on first use, not by every process.
    import mcp

    if not isinstance(target, str):
        return target  # an in-process server object
    if target.startswith(("http://", "https://")):
        return target
    parts = shlex.split(target)
    if not parts:
        raise ValueError("Give an MCP server URL or the command that starts it.")
    return mcp.StdioServerParameters(command=parts[0], args=parts[1:])


async def _list(target: Any, headers: dict[str, str]) -> ListedTools:
    # The mcp SDK takes about a second to import: loaded on first use, not by every process.
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        target = _client_target(target)
        if isinstance(target, str):  # a URL: through the egress guard, like every server-side request
            http = await stack.enter_async_context(egress.async_client(headers=headers))
            target = streamable_http_client(target, http_client=http)
        client = await stack.enter_async_context(mcp.Client(target))
        result = await client.list_tools()
        info = client.server_info
        tools = [tool.model_dump(by_alias=True, exclude_none=True) for tool in result.tools]
        return ListedTools(server_name=getattr(info, "name", "") or "server", tools=tools)


def list_mcp_tools(target: Any, *, headers: dict[str, str] | None = None, timeout: float = 30) -> ListedTools:
    """The tools of an MCP server: a URL (streamable HTTP, with `headers`), a command line (stdio) or a server
    object."""
    return asyncio.run(asyncio.wait_for(_list(target, headers or {}), timeout))


def slug(text: str) -> str:
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return "_".join(re.findall(r"[a-z0-9]+", words.lower())) or "tool"


def _closed(schema: Any) -> Any:
    """The tool's input schema with every object closed (additionalProperties: false), titles dropped."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: _closed(value) for key, value in schema.items() if key != "title"}
    if "properties" in schema and isinstance(schema["properties"], dict):
        result["properties"] = {name: _closed(sub) for name, sub in schema["properties"].items()}
    if result.get("type") == "object" or "properties" in result:
        result["additionalProperties"] = False
    return result


def risk_defaults(annotations: dict) -> tuple[dict, dict]:
    """Risk and execution defaults suggested by MCP annotations (hints, not guarantees)."""
    effect = effect_of_annotations(annotations)
    read_only, destructive = effect == "read", effect == "destructive"
    idempotent = annotations.get("idempotentHint") is True or read_only
    open_world = annotations.get("openWorldHint") is True
    approval = "required" if effect in ("destructive", "external") else "not_required"
    risk = {"effect": effect, "data_classification": "internal", "approval": approval, "untrusted_output": open_world}
    execution_hints = {"max_attempts": 2 if idempotent and not destructive else 1, "idempotent": idempotent}
    return risk, execution_hints


def manifest_for_tool(
    *, server: str, tool: dict, team: str, roles: list[str], tenants: list[str], namespace: str = ""
) -> dict:
    """A draft manifest for one tool of `server` (the registered name adapters say), named in
    `mcp.<namespace>` (default: the server's name; a skill name has no hyphens)."""
    namespace = namespace or server
    tool_name = slug(tool["name"])
    name = f"mcp.{namespace}.{tool_name}"
    description = (tool.get("description") or "").strip()
    if len(description) < 20:
        description = (
            description + f" (Imported from the MCP server {server}; describe what it does, when to use "
            "it and its side effects.)"
        ).strip()
    risk, hints = risk_defaults(tool.get("annotations") or {})
    input_schema = _closed(copy.deepcopy(tool.get("inputSchema") or {"type": "object", "properties": {}}))
    input_schema.setdefault("type", "object")
    input_schema["additionalProperties"] = False
    output_schema = (
        _closed(copy.deepcopy(tool.get("outputSchema")))
        if tool.get("outputSchema")
        else {"type": "object", "description": "Unstructured MCP content."}
    )
    return {
        "skill_id": f"skl_mcp_{namespace}_{tool_name}"[:64],
        "name": name,
        "version": "0.1.0",
        "description": description[:2000],
        "input_schema": input_schema,
        "output_schema": output_schema,
        "risk": risk,
        "permissions": {"allowed_agent_roles": roles, "allowed_tenants": tenants, "oauth_scopes": []},
        "execution": {
            "adapter": f"mcp://{server}/{tool['name']}",
            "timeout_ms": 10_000,
            "result_limit_bytes": 65_536,
            **hints,
        },
        "ownership": {"team": team},
    }


@dataclass
class ImportResult:
    server: str
    created: list[SkillVersion]
    skipped: list[str]
    failed: dict[str, list[dict]]


def import_mcp_server(
    *,
    target: Any,
    team: Team,
    headers: dict[str, str] | None = None,
    author=None,
    server_name: str = "",
    roles: list[str] | None = None,
    tenants: list[str] | None = None,
) -> ImportResult:
    """Create one unconfirmed draft per tool; tools whose skill already exists are skipped.

    The drafts' adapters say `mcp://<server_name>/<tool>`: give the server's registered name (the drafts'
    team must own it or have it shared, `registry.contracts`); the skill namespace is `mcp.<its slug>`."""
    listed = list_mcp_tools(target, headers=headers)
    namespace = slug(server_name or listed.server_name)
    server = server_name or namespace
    result = ImportResult(server=namespace, created=[], skipped=[], failed={})
    for tool in listed.tools:
        manifest = manifest_for_tool(
            server=server,
            tool=tool,
            team=team.slug,
            roles=roles or ["*"],
            tenants=tenants or ["*"],
            namespace=namespace,
        )
        if Skill.objects.filter(name=manifest["name"]).exists():
            result.skipped.append(manifest["name"])
            continue
        definition = definition_of(tool)
        imported_from = {
            "server": server,
            "tool": tool["name"],
            "annotations": tool.get("annotations") or {},
            "definition": definition,  # pinned at review: a server serving another is not called (runs/plane)
            "findings": findings(definition),  # what its texts say to the model that a reviewer must see
        }
        try:
            version = create_draft_version(manifest=manifest, author=author, imported_from=imported_from)
        except ManifestInvalid as exc:
            result.failed[manifest["name"]] = exc.errors
            continue
        result.created.append(version)
    return result
