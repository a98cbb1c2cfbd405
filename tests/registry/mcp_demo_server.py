"""A small real MCP server for the import tests: in-process (`server`) or over stdio (run this file)."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("Ticket Desk")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def get_ticket(ticket_id: str) -> dict:
    """Read one support ticket by its id. No side effects."""
    return {"ticket_id": ticket_id, "status": "open"}


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def deleteTicket(ticket_id: str, reason: str = "") -> str:  # noqa: N802 - a camelCase MCP tool on purpose
    """Delete a ticket."""
    return "deleted"


@server.tool(annotations=ToolAnnotations(open_world_hint=True))
def notify_customer(ticket_id: str, message: str) -> str:
    """Send the customer a notification about their ticket by SMS."""
    return "sent"


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:  # a port: serve streamable HTTP at http://127.0.0.1:<port>/mcp
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run(transport="stdio")
