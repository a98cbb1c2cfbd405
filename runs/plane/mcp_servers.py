"""Registered MCP servers: what `mcp://<server>/<tool>` means, and calling one tool with the official SDK."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from typing import Any

from lib import egress
from lib.tool_descriptions import definition_of
from runs.errors import CallError, NotPermitted, RateLimited, Transient, Unavailable, egress_refused
from runs.plane import tool_pins
from runs.plane.downstream_errors import tool_refusal
from runs.plane.models import McpServer, McpServerStatus, McpTransport

IDEMPOTENCY_META = "airlock/idempotency_key"


def parse(uri: str) -> tuple[str, str]:
    server, _, tool = uri.removeprefix("mcp://").partition("/")
    return server, tool


def owning_team(manifest: dict) -> str:
    """The team a skill's manifest names as its owner (the registry keeps it equal to the skill's)."""
    ownership = manifest.get("ownership")
    return str(ownership.get("team") or "") if isinstance(ownership, dict) else ""


def server_for(name: str, *, team: str) -> McpServer:
    """The approved server `name` if skills of `team` may call it (`McpServer.usable_by`), else the typed
    refusal. The registry asks the same when a manifest is stored and published (`access_refusal`); this is
    asked again before every connection, so that a version stored before the rule existed sends nothing."""
    server = McpServer.objects.filter(name=name).select_related("team").first()
    if server is None:
        raise Unavailable(f"No MCP server named {name} is registered in this deployment.", code="unknown_server")
    if server.status != McpServerStatus.APPROVED:  # a team's proposal nobody else has approved yet, or declined
        raise Unavailable(f"The MCP server {name} is not approved for use.", code="server_not_approved")
    if not server.usable_by(team):
        raise NotPermitted(
            f"The MCP server {name} belongs to {server.owner_label} and is not shared with "
            f"{team or 'a skill without an owning team'}: a skill names only an approved server of its own team "
            "or one shared with it.",
            code="mcp_server_not_for_team",
        )
    return server


def access_refusal(*, server: str, team_slug: str) -> tuple[str, str] | None:
    """(code, message) when skills of `team_slug` may not name `server`; the registry's hook receiver."""
    try:
        server_for(server, team=team_slug)
    except CallError as exc:
        return exc.code, exc.message
    return None


def connection_for(uri: str, *, team: str) -> dict:
    """The server's connection settings (headers unsealed) for a skill owned by `team`, or a typed refusal."""
    name, tool = parse(uri)
    server = server_for(name, team=team)
    return {
        "server": server,
        "pinned": tool_pins.expected(server, tool),  # the reviewed definition's hash (runs/plane/tool_pins.py)
        "name": server.name,
        "transport": server.transport,
        "url": server.url,
        "command": server.command,
        "headers": server.headers(),
    }


async def _call(
    connection: dict, tool: str, arguments: dict, headers: dict, meta: dict, pinned: str | None
) -> tuple[Any, dict | None]:
    # The mcp SDK takes about a second to import: loaded on first use, not by every process.
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    if connection["transport"] == McpTransport.STDIO:
        parts = shlex.split(connection["command"])
        async with mcp.Client(mcp.StdioServerParameters(command=parts[0], args=parts[1:])) as client:
            return await _checked_call(client, tool, arguments, meta, pinned)
    async with (
        egress.async_client(headers=headers) as http,
        mcp.Client(streamable_http_client(connection["url"], http_client=http)) as client,
    ):
        return await _checked_call(client, tool, arguments, meta, pinned)


async def _checked_call(client: Any, tool: str, arguments: dict, meta: dict, pinned: str | None):
    """The tool's definition as served now, on the same connection, and the call only if it is the pinned one
    (None: not called). Without a pin yet the call goes on and the served definition becomes the pin."""
    listed = await client.list_tools()
    found = next((t for t in listed.tools if t.name == tool), None)
    definition = definition_of(found.model_dump(by_alias=True, exclude_none=True)) if found is not None else None
    if pinned is not None and definition is not None and tool_pins.hash_of(definition) != pinned:
        return None, definition
    return await client.call_tool(tool, arguments, meta=meta or None), definition


def content_of(result: Any) -> Any:
    """Structured content when the tool gives it, else its text (parsed when it is JSON)."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    text = "\n".join(texts)
    try:
        return json.loads(text)
    except ValueError:
        return text


def call_tool(
    connection: dict,
    tool: str,
    arguments: dict,
    *,
    headers: dict | None = None,
    timeout_s: float,
    idempotency_key: str = "",
    on_served: Callable[[dict | None], None] | None = None,
) -> Any:
    """Call one tool and return its content; a tool error or a transport failure becomes a typed CallError.
    The tool is called only while the server serves its pinned definition; what it served goes to `on_served`
    (the execution plane keeps it after the call, in the caller's thread), else is recorded here."""
    meta = {IDEMPOTENCY_META: idempotency_key} if idempotency_key else {}
    all_headers = {**connection.get("headers", {}), **(headers or {})}
    pinned = connection.get("pinned")
    calling = _call(connection, tool, arguments, all_headers, meta, pinned)
    try:
        result, definition = asyncio.run(asyncio.wait_for(calling, timeout_s))
    except TimeoutError as exc:
        raise Transient("The MCP server did not answer in time.", code="downstream_timeout") from exc
    except Exception as exc:  # the SDK wraps transport errors in exception groups
        raise error_for(exc, tool=tool) from exc
    if on_served is not None:
        on_served(definition)
    elif connection.get("server") is not None:
        tool_pins.record(connection["server"], tool, definition)
    if result is None:
        raise tool_pins.changed(connection["name"], tool)
    if result.is_error:
        said = " ".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        raise tool_refusal(tool, said)  # classed by what it says: validation, not_found, conflict...
    return content_of(result)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    chain = [exc]
    while exc.__cause__ is not None and len(chain) < 5:
        exc = exc.__cause__
        chain.append(exc)
    return chain


def error_for(exc: BaseException, *, tool: str) -> CallError:
    import httpx2
    from mcp.shared.exceptions import MCPError

    refusal = egress.refusal_in(exc)
    if refusal is not None:
        return egress_refused(refusal)
    for leaf in _leaves(exc):
        if isinstance(leaf, CallError):
            return leaf
        if isinstance(leaf, MCPError):  # the server answered the call with a JSON-RPC error
            return tool_refusal(tool, leaf.message, jsonrpc_code=leaf.code)
        if isinstance(leaf, httpx2.HTTPStatusError):
            status = leaf.response.status_code
            if status == 429:
                return RateLimited("The MCP server is rate limiting.", code="downstream_rate_limited", retry_after=1)
            if status in (401, 403):
                return NotPermitted(f"The MCP server answered HTTP {status}.", code="downstream_forbidden")
            if status in (502, 503, 504):
                return Transient(f"The MCP server answered HTTP {status}.", code="downstream_unavailable")
            return Unavailable(f"The MCP server answered HTTP {status}.", code="downstream_error")
        if isinstance(leaf, httpx2.ConnectError | ConnectionRefusedError):
            return Unavailable("The MCP server could not be reached.", code="downstream_unreachable")
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return Transient("The MCP server did not answer in time.", code="downstream_timeout")
        if isinstance(leaf, httpx2.ReadError | httpx2.RemoteProtocolError | ConnectionResetError):
            return Transient("The connection to the MCP server broke mid-call.", code="connection_reset")
    return Unavailable("The MCP server failed to answer.", code="downstream_error")
