"""The MCP tests' clients: an agent's HTTP client that remembers the session ids Airlock issues."""

from __future__ import annotations

import httpx2


def session_remembering_client(key: str) -> tuple[httpx2.AsyncClient, list[str]]:
    """An agent's HTTP client for the official MCP client, and the list it appends each issued
    `Mcp-Session-Id` to (the last one is the live session)."""
    seen: list[str] = []

    async def remember(response: httpx2.Response) -> None:
        if response.headers.get("mcp-session-id"):
            seen.append(response.headers["mcp-session-id"])

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=30, event_hooks={"response": [remember]}
    )
    return http, seen
