"""Airlock as an MCP server at `/mcp`: an agent's MCP client lists its granted skills and calls them
through the gate, one run per MCP session (docs/sdk.md, "MCP clients")."""
