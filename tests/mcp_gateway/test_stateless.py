"""Sessionless MCP (the 2026-07-28 protocol: no Mcp-Session-Id, each request stands alone), attacked as
the review did: two agents of two tenants in one process, each must be answered, in runs of its own."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_MODERN_VERSION

from runs.models import Run, ToolCall
from tests.mcp_gateway.clients import session_remembering_client

LOOKUP = ("crm.lookup_customer", {"customer_id": "c-1"})


@asynccontextmanager
async def sessionless_client(url: str, key: str):
    """The official client pinned to the modern protocol: it never opens a session."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=LATEST_MODERN_VERSION) as client:
        yield client


async def _sessionless_calls(url: str, key: str, count: int) -> list:
    async with sessionless_client(url, key) as client:
        return [await client.call_tool(*LOOKUP) for _ in range(count)]


def _runs_of(agent_name: str) -> list[Run]:
    return list(Run.objects.filter(agent__name=agent_name).select_related("agent", "tenant").order_by("created_at"))


def test_two_agents_of_two_tenants_calling_sessionless_are_both_answered_each_in_runs_of_its_own(
    mcp_live_server, catalog, acme, globex, acme_key, globex_key, downstream
):
    acme_results = asyncio.run(_sessionless_calls(mcp_live_server.url, acme_key, 2))
    globex_results = asyncio.run(_sessionless_calls(mcp_live_server.url, globex_key, 1))

    for result in [*acme_results, *globex_results]:
        assert not result.is_error, result
        assert result.structured_content["status"] == "ok"
    acme_runs, globex_runs = _runs_of("support-bot"), _runs_of("globex-bot")
    assert len(acme_runs) == 2  # two sessionless calls of one agent: two runs, nothing ties them together
    assert len(globex_runs) == 1
    assert {run.tenant for run in acme_runs} == {acme} and {run.tenant for run in globex_runs} == {globex}
    for run in [*acme_runs, *globex_runs]:
        assert [call.name for call in ToolCall.objects.filter(run=run)] == ["crm.lookup_customer"]
    assert len(downstream.arrivals) == 3


async def _concurrently(url: str, acme_key: str, globex_key: str) -> list:
    return await asyncio.gather(
        _sessionless_calls(url, acme_key, 3),
        _sessionless_calls(url, globex_key, 3),
        _sessionless_calls(url, acme_key, 3),
    )


def test_sessionless_agents_of_two_tenants_at_once_never_share_a_run(
    mcp_live_server, catalog, acme_key, globex_key, downstream
):
    batches = asyncio.run(_concurrently(mcp_live_server.url, acme_key, globex_key))
    assert all(not result.is_error for batch in batches for result in batch)
    runs = Run.objects.select_related("agent").all()
    assert len(runs) == 9
    for run in runs:
        assert run.tenant_id == run.agent.tenant_id
        assert ToolCall.objects.filter(run=run).count() == 1


async def _list_then_call(url: str, key: str) -> tuple[list[str], object]:
    async with sessionless_client(url, key) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        return listed, await client.call_tool(*LOOKUP)


def test_a_sessionless_list_starts_no_run_and_shows_what_a_call_may_use(
    mcp_live_server, catalog, acme_key, globex_key, downstream
):
    listed, result = asyncio.run(_list_then_call(mcp_live_server.url, acme_key))
    assert "crm.lookup_customer" in listed and "crm.globex_only" not in listed and "hr.salaries" not in listed
    assert not result.is_error
    run = Run.objects.get()  # the call's run; listing opened none
    exposed = ToolCall.objects.get(run=run).decision["exposed_tools"]
    # A sessionless call cannot know which listing its model saw: the gate records what this run offered,
    # and that holds every skill the sessionless list showed (both read the newest snapshot).
    listed_skills = set(listed) - {"find_tools", "describe_tool", "describe_result", "human.ask", "check_approval"}
    assert exposed["source"] == "gate" and listed_skills <= set(exposed["names"])
    globex_listed, _ = asyncio.run(_list_then_call(mcp_live_server.url, globex_key))
    assert "crm.globex_only" in globex_listed


async def _hijack(url: str, owner_key: str, intruder_key: str) -> tuple[object, httpx2.Response, object]:
    """The owner opens a session; the intruder, with its own valid key, sends a call under that session's id."""
    http, seen = session_remembering_client(owner_key)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as owner:
        before = await owner.call_tool(*LOOKUP)
        async with httpx2.AsyncClient(timeout=30) as intruder:
            refused = await intruder.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {"name": LOOKUP[0], "arguments": LOOKUP[1]},
                },
                headers={
                    "Authorization": f"Bearer {intruder_key}",
                    "Mcp-Session-Id": seen[-1],
                    "MCP-Protocol-Version": "2025-11-25",
                    "Accept": "application/json, text/event-stream",
                },
            )
        after = await owner.call_tool(*LOOKUP)
    return before, refused, after


def test_another_agent_sending_a_sessions_id_does_not_reach_that_session(
    mcp_live_server, catalog, acme_key, globex_key, downstream
):
    before, refused, after = asyncio.run(_hijack(mcp_live_server.url, acme_key, globex_key))
    assert refused.status_code == 404  # answered exactly as a session that does not exist
    assert not before.is_error and not after.is_error
    run = Run.objects.get()  # the owner's one session run; the intruder's call reached no run
    assert run.agent.name == "support-bot"
    assert ToolCall.objects.filter(run=run).count() == 2 and ToolCall.objects.count() == 2


async def _refund_then_checks(url: str, acme_key: str, globex_key: str) -> tuple:
    async with sessionless_client(url, acme_key) as acme_client:
        pending = await acme_client.call_tool("billing.create_refund", {"customer_id": "c-42", "amount_cents": 1250})
        approval_id = pending.structured_content["approval_id"]
        own = await acme_client.call_tool("check_approval", {"approval_id": approval_id})
    async with sessionless_client(url, globex_key) as globex_client:
        probe = await globex_client.call_tool("check_approval", {"approval_id": approval_id})
    return pending, own, probe


def test_a_sessionless_call_that_needs_approval_waits_in_its_own_run_and_only_its_agent_may_check_it(
    mcp_live_server, catalog, acme_key, globex_key
):
    pending, own, probe = asyncio.run(_refund_then_checks(mcp_live_server.url, acme_key, globex_key))
    assert pending.structured_content["status"] == "approval_pending"
    assert own.structured_content["status"] == "approval_pending"
    assert probe.is_error and probe.structured_content["error"]["code"] == "unknown_approval"
    (run,) = _runs_of("support-bot")  # check_approval starts no run
    assert [call.name for call in ToolCall.objects.filter(run=run)] == ["billing.create_refund"]
