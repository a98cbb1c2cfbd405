"""A rotated key on `/mcp`, with the official MCP client against a live server: the old key keeps working in
its grace period, and is refused mid-session once it is cut off or its grace period ends."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from django.db import connection

from console.models import Agent
from console.services import cut_off_old_key, rotate_agent_key
from runs.models import ToolCall
from tests.mcp_gateway.conftest import mcp_client
from traces.models import Span

LOOKUP = ("crm.lookup_customer", {"customer_id": "c-1"})


def _in_thread(action, agent: Agent) -> None:
    """In a thread of its own (the test's event loop is running), then close that thread's connection."""
    try:
        action(agent=agent, by=None)
    finally:
        connection.close()


async def _call_then_cut_off_then_call(url: str, key: str, agent: Agent) -> None:
    async with mcp_client(url, key) as client:
        assert not (await client.call_tool(*LOOKUP)).is_error
        await asyncio.to_thread(_in_thread, cut_off_old_key, agent)
        with pytest.raises(Exception):  # noqa: B017 - the client surfaces the 401 as a transport error
            await client.call_tool("crm.lookup_customer", {"customer_id": "c-2"})


async def _one_call(url: str, key: str) -> bool:
    async with mcp_client(url, key) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "crm.lookup_customer" in names
        return not (await client.call_tool(*LOOKUP)).is_error


def _refusal(url: str, key: str) -> httpx.Response:
    return httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
    )


def test_both_keys_work_in_the_grace_period_and_a_cut_off_ends_the_old_keys_session(
    mcp_live_server, catalog, agent_and_key, downstream
):
    agent, old = agent_and_key
    agent, new = rotate_agent_key(agent=agent, by=None)
    assert asyncio.run(_one_call(mcp_live_server.url, old)) and asyncio.run(_one_call(mcp_live_server.url, new))
    recorded = {
        span.attributes.get("airlock.agent.key_lookup")
        for span in Span.objects.filter(call__in=ToolCall.objects.filter(run__agent=agent))
    }
    assert recorded == {agent.previous_key_lookup, agent.key_lookup}

    asyncio.run(_call_then_cut_off_then_call(mcp_live_server.url, old, agent))
    assert _refusal(mcp_live_server.url, old).json()["error"]["code"] == "replaced_key"
    assert asyncio.run(_one_call(mcp_live_server.url, new))
    assert [arrival.body for arrival in downstream.arrivals].count({"customer_id": "c-2"}) == 0


def test_the_old_key_is_refused_once_its_grace_period_is_over(mcp_live_server, catalog, agent_and_key, clock):
    agent, old = agent_and_key
    rotate_agent_key(agent=agent, by=None)
    clock.advance(24 * 3600 + 1)
    refused = _refusal(mcp_live_server.url, old)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "replaced_key"
