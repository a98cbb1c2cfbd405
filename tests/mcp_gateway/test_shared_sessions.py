"""MCP sessions kept by Airlock (mcp_gateway/sessions.py), not in a process: attacked as an intruder would
try to reach or forge one. (Across three real processes: tests/faults/test_three_processes.py.)"""

from __future__ import annotations

import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_MODERN_VERSION

from mcp_gateway import sessions
from runs.models import Run, ToolCall
from tests.mcp_gateway.clients import session_remembering_client

LOOKUP = ("crm.lookup_customer", {"customer_id": "c-1"})
LEGACY_HEADERS = {"MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"}


CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": LOOKUP[0], "arguments": LOOKUP[1]}}


async def _open_and_call(url: str, key: str) -> tuple[str, object]:
    """The official client in a session: initialize, one call; the session id it was issued."""
    http, seen = session_remembering_client(key)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool(*LOOKUP)
    return seen[0], result


async def _raw(url: str, key: str, session_id: str, method: str = "POST") -> httpx2.Response:
    headers = {"Authorization": f"Bearer {key}", "Mcp-Session-Id": session_id, **LEGACY_HEADERS}
    async with httpx2.AsyncClient(timeout=30) as http:
        if method == "POST":
            return await http.post(url, json=CALL, headers=headers)
        return await http.request(method, url, headers=headers)


def test_a_session_id_is_unguessable_and_issued_only_on_initialize(mcp_live_server, catalog, acme_key, downstream):
    session_id, result = asyncio.run(_open_and_call(mcp_live_server.url, acme_key))
    assert not result.is_error
    assert sessions.SESSION_ID.fullmatch(session_id)  # 43 url-safe characters: 256 random bits
    # Made-up ids, one of the issued id's shape, and one far too long for a key: all unknown sessions.
    for forged in ("1", "a" * 43, session_id[:-1] + ("A" if session_id[-1] != "A" else "B"), "x" * 5000):
        refused = asyncio.run(_raw(mcp_live_server.url, acme_key, forged))
        assert refused.status_code == 404 and refused.json()["error"]["message"] == "Session not found"
    assert ToolCall.objects.count() == 1  # none of the forged requests reached the gate


def test_after_delete_the_session_is_gone_for_its_own_agent_too(mcp_live_server, catalog, acme_key, downstream):
    # The official client sends DELETE when it closes the session.
    session_id, _ = asyncio.run(_open_and_call(mcp_live_server.url, acme_key))
    after = asyncio.run(_raw(mcp_live_server.url, acme_key, session_id))
    assert after.status_code == 404
    assert ToolCall.objects.count() == 1


def test_another_agent_cannot_end_a_session_that_is_not_its_own(
    mcp_live_server, catalog, acme_key, globex_key, downstream
):
    session_id = asyncio.run(sessions_open(mcp_live_server.url, acme_key))
    deleted = asyncio.run(_raw(mcp_live_server.url, globex_key, session_id, method="DELETE"))
    assert deleted.status_code == 404
    still = asyncio.run(_raw(mcp_live_server.url, acme_key, session_id))
    assert still.status_code == 200  # the owner's session is untouched


async def sessions_open(url: str, key: str) -> str:
    """A session opened by hand (initialize only), left open."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=body, headers={"Authorization": f"Bearer {key}", **LEGACY_HEADERS})
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


async def _modern_call_with_header(url: str, key: str, session_id: str) -> object:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}", "Mcp-Session-Id": session_id}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=LATEST_MODERN_VERSION) as client:
        return await client.call_tool(*LOOKUP)


def test_a_sessionless_request_naming_another_agents_session_stays_sessionless(
    mcp_live_server, catalog, acme_key, globex_key, downstream
):
    session_id = asyncio.run(sessions_open(mcp_live_server.url, acme_key))
    asyncio.run(_raw(mcp_live_server.url, acme_key, session_id))  # the owner's call starts the session's run
    result = asyncio.run(_modern_call_with_header(mcp_live_server.url, globex_key, session_id))
    assert not result.is_error
    owner_run, intruder_run = Run.objects.select_related("agent").order_by("created_at")
    assert owner_run.agent.name == "support-bot" and intruder_run.agent.name == "globex-bot"
    assert ToolCall.objects.filter(run=owner_run).count() == 1  # nothing joined the owner's run
