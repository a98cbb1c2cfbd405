"""`mcp://<server>/<tool>`: call a tool of a registered MCP server with the official SDK.

The server's URL or command and its headers come from `reliability.McpServer` (never from the
manifest); the tenant's credential, if the manifest names one, is added at execution only.
"""

from __future__ import annotations

from runs.adapters.base import AdapterResult, InvocationContext
from runs.plane.credentials import attached_headers
from runs.plane.execution import current_trail
from runs.plane.mcp_servers import call_tool, connection_for, owning_team, parse


class McpAdapter:
    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult:
        uri = manifest["execution"]["adapter"]
        trail = current_trail()
        # `prepare` looked the server up for the skill's team; without a trail, the same check here
        prepared = trail.mcp if trail is not None else None
        connection = prepared or connection_for(uri, team=owning_team(manifest))
        headers = {"X-Airlock-Run": context.run_id, "X-Airlock-Call": context.call_id, **attached_headers()}
        tool = parse(uri)[1]
        content = call_tool(
            connection,
            tool,
            arguments,
            headers=headers,
            timeout_s=context.timeout_s,
            idempotency_key=context.idempotency_key,
            on_served=(lambda served: trail.keep_served(connection["server"], tool, served)) if trail else None,
        )
        return AdapterResult(content=content, metadata={"mcp_server": connection["name"]})
