"""Airlock as an MCP server, driven by the official MCP client over real HTTP against a live uvicorn."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from console.services import revoke_agent
from runs.models import Run, ToolCall
from tests.approvals import worker_tools
from tests.mcp_gateway.conftest import mcp_client

GRANTED = {
    "crm.lookup_customer",
    "crm.add_note",
    "crm.export_everything",
    "crm.purge_customer",
    "billing.create_refund",
    "iam.revoke_access",
}
REFUND = {"customer_id": "c-42", "amount_cents": 1250}
DISCOVERY_TOOLS = {"find_tools", "describe_tool", "describe_result", "human.ask"}


def _approve(base_url: str, token: str, approval_id: int) -> httpx.Response:
    """A person's request to the approver API, as the inbox's API clients make it."""
    return httpx.post(
        f"{base_url}/api/v1/approvals/{approval_id}/decision",
        json={"decision": "approve"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=20,
    )


async def _tools(url: str, key: str) -> dict:
    async with mcp_client(url, key) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def test_lists_exactly_the_agents_granted_current_skills_with_effect_hints(
    mcp_live_server, catalog, acme_key, globex_key
):
    tools = asyncio.run(_tools(mcp_live_server.url, acme_key))
    # Not listed: hr.salaries (no grant), crm.old_report (retired), crm.globex_only (offered to globex
    # only) and crm.local_notes (executed by the agent's own process, which an MCP client cannot do).
    assert set(tools) == GRANTED | DISCOVERY_TOOLS | {"check_approval"}
    lookup, note, purge, refund = (
        tools[name].annotations
        for name in ("crm.lookup_customer", "crm.add_note", "crm.purge_customer", "billing.create_refund")
    )
    assert lookup.read_only_hint and lookup.idempotent_hint and not lookup.destructive_hint
    assert not note.read_only_hint and not note.destructive_hint and not note.open_world_hint
    assert purge.destructive_hint and not purge.read_only_hint
    assert refund.open_world_hint and refund.idempotent_hint  # external; the manifest says idempotent
    assert tools["billing.create_refund"].input_schema["required"] == ["customer_id", "amount_cents"]
    assert tools["check_approval"].annotations.read_only_hint

    rest = httpx.get(
        f"{mcp_live_server.base_url}/api/v1/tools",
        params={"format": "mcp"},
        headers={"Authorization": f"Bearer {acme_key}"},
    ).json()["tools"]
    assert {tool["name"] for tool in rest} - {"crm.local_notes"} == GRANTED  # the same scoping as the REST API

    globex_tools = set(asyncio.run(_tools(mcp_live_server.url, globex_key)))
    assert (
        globex_tools
        == {"crm.lookup_customer", "crm.add_note", "crm.export_everything", "crm.purge_customer"}
        | {
            "crm.globex_only",
            "check_approval",
        }
        | DISCOVERY_TOOLS
    )


async def _calls(url: str, key: str, calls: list[tuple[str, dict]], **headers: str) -> list:
    """The calls one after the other in one MCP session."""
    async with mcp_client(url, key, **headers) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def test_an_allowed_call_runs_once_in_the_sessions_run(mcp_live_server, catalog, acme_key, downstream):
    first, second = asyncio.run(
        _calls(
            mcp_live_server.url,
            acme_key,
            [("crm.lookup_customer", {"customer_id": "c-1"}), ("crm.lookup_customer", {"customer_id": "c-2"})],
            **{"X-Airlock-End-User": "user:dana"},
        )
    )
    assert not first.is_error and first.structured_content["content"] == {"ok": True, "echo": {"customer_id": "c-1"}}
    assert '"customer_id": "c-1"' in first.content[0].text
    assert not second.is_error
    run = Run.objects.get()  # one run for the session, acting for the end user the client named
    assert run.end_user == "user:dana" and run.agent.name == "support-bot"
    assert list(
        ToolCall.objects.filter(run=run).order_by("position", "created_at").values_list("call_id", "status")
    ) == [
        ("mcp-1", "succeeded"),
        ("mcp-2", "succeeded"),
    ]
    assert [arrival.body for arrival in downstream.arrivals] == [{"customer_id": "c-1"}, {"customer_id": "c-2"}]


def test_denied_and_refused_calls_are_tool_errors_with_their_class(mcp_live_server, catalog, acme_key, downstream):
    denied, ungranted, other_tenants, invalid = asyncio.run(
        _calls(
            mcp_live_server.url,
            acme_key,
            [
                ("crm.export_everything", {}),
                ("hr.salaries", {}),
                ("crm.globex_only", {}),
                ("billing.create_refund", {"customer_id": "c-1", "amount_cents": -5}),
            ],
        )
    )
    assert denied.is_error and denied.structured_content["error"]["class"] == "authorization"
    assert denied.structured_content["error"]["code"] == "denied_by_policy"
    assert denied.content[0].text.startswith("authorization (denied_by_policy): bulk exports are not allowed")
    assert ungranted.is_error and ungranted.structured_content["error"]["class"] in ("authorization", "not_found")
    assert other_tenants.is_error and other_tenants.structured_content["error"]["class"] in (
        "authorization",
        "not_found",
    )
    assert invalid.is_error and invalid.structured_content["error"]["class"] == "validation"
    assert downstream.arrivals == []  # nothing refused reached the downstream
    assert ToolCall.objects.get(name="crm.export_everything").status == "denied"


async def _two_notes_at_once(url: str, key: str) -> list:
    async with mcp_client(url, key) as client:
        first = asyncio.create_task(client.call_tool("crm.add_note", {"note": "first"}))
        await asyncio.sleep(0.05)  # the model's order: the first proposed reaches Airlock first
        second = asyncio.create_task(client.call_tool("crm.add_note", {"note": "second"}))
        return await asyncio.gather(first, second)


def test_two_writes_of_one_session_reach_the_downstream_one_after_the_other_in_order(
    mcp_live_server, catalog, acme_key, downstream
):
    results = asyncio.run(_two_notes_at_once(mcp_live_server.url, acme_key))
    assert [result.is_error for result in results] == [False, False]
    notes = [arrival for arrival in downstream.arrivals if arrival.path == "/note"]
    assert [arrival.body["note"] for arrival in notes] == ["first", "second"]
    assert notes[0].finished <= notes[1].started, "the second write started before the first had finished"


def _revoke(agent) -> None:
    """In a thread of its own (the test's event loop is running): revoke, then close that thread's connection."""
    try:
        revoke_agent(agent=agent)
    finally:
        connection.close()


async def _call_then_revoke_then_call(url: str, key: str, agent) -> None:
    async with mcp_client(url, key) as client:
        assert not (await client.call_tool("crm.lookup_customer", {"customer_id": "c-1"})).is_error
        await asyncio.to_thread(_revoke, agent)
        with pytest.raises(Exception):  # noqa: B017 - the client surfaces the 401 as a transport error
            await client.call_tool("crm.lookup_customer", {"customer_id": "c-2"})


def test_a_wrong_or_revoked_key_is_refused(mcp_live_server, catalog, acme, agent_and_key, downstream):
    answer = httpx.post(
        mcp_live_server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer ak_aaaaaaaaaaaa_notthesecretnotthesecret", "Accept": "application/json"},
    )
    assert answer.status_code == 401 and answer.json()["error"]["class"] == "authentication"
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert httpx.post(mcp_live_server.url, json={}).status_code == 401  # no key at all

    agent, key = agent_and_key
    asyncio.run(_call_then_revoke_then_call(mcp_live_server.url, key, agent))
    assert [arrival.body for arrival in downstream.arrivals] == [{"customer_id": "c-1"}]


def test_another_tenants_agent_cannot_see_or_use_an_approval(mcp_live_server, catalog, acme_key, globex_key):
    (pending,) = asyncio.run(_calls(mcp_live_server.url, acme_key, [("billing.create_refund", REFUND)]))
    approval_id = pending.structured_content["approval_id"]
    probe, missing = asyncio.run(
        _calls(
            mcp_live_server.url,
            globex_key,
            [("check_approval", {"approval_id": approval_id}), ("check_approval", {"approval_id": approval_id + 1000})],
        )
    )
    assert probe.is_error and probe.structured_content["error"]["code"] == "unknown_approval"
    assert probe.content[0].text == missing.content[0].text.replace(str(approval_id + 1000), str(approval_id))
    assert ApprovalRequest.objects.get(pk=approval_id).status == "pending"


@pytest.mark.postgres
@pytest.mark.redis
def test_confirm_waits_then_a_person_approves_in_the_inbox_and_check_approval_returns_the_result(
    mcp_live_server, catalog, acme_key, approver_token, celery_worker, settings
):
    direct = asyncio.run(_confirm_flow(mcp_live_server, acme_key, approver_token, settings))
    assert not direct.is_error and direct.structured_content["content"]["amount_cents"] == 300, direct
    assert [entry["result"]["amount_cents"] for entry in worker_tools.executions()] == [1250, 300]
    assert "approvals.tasks.resume_call" in celery_worker.read_text()  # the worker, not the server, resumed it


async def _confirm_flow(mcp_live_server, acme_key: str, approver_token: str, settings):
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with mcp_client(mcp_live_server.url, acme_key) as client:
        pending = await client.call_tool("billing.create_refund", REFUND, progress_callback=on_progress)
        assert not pending.is_error and pending.structured_content["status"] == "approval_pending"
        approval_id = pending.structured_content["approval_id"]
        assert f"check_approval with approval_id {approval_id}" in pending.content[0].text
        assert progress and all(f"approval {approval_id}" in message for message in progress)
        assert worker_tools.executions() == []  # nothing ran before a person decided

        # The MCP client's user cannot approve; a person with the approver role decides over HTTP.
        decided = await asyncio.to_thread(_approve, mcp_live_server.base_url, approver_token, approval_id)
        assert decided.status_code == 200, decided.text

        result = await client.call_tool("check_approval", {"approval_id": approval_id}, progress_callback=on_progress)
        for _ in range(10):  # the worker may take longer than one bounded wait
            if result.structured_content.get("status") != "approval_pending":
                break
            result = await client.call_tool("check_approval", {"approval_id": approval_id})
        assert not result.is_error and result.structured_content["status"] == "ok", result
        assert result.structured_content["content"]["amount_cents"] == 1250

        # Decided while the call still waits: the call itself answers with the executed result.
        settings.AIRLOCK_MCP_APPROVAL_WAIT_SECONDS = 30.0
        waiting = asyncio.create_task(client.call_tool("billing.create_refund", {**REFUND, "amount_cents": 300}))
        second_id = await asyncio.to_thread(_next_pending_approval, approval_id)
        decided = await asyncio.to_thread(_approve, mcp_live_server.base_url, approver_token, second_id)
        assert decided.status_code == 200, decided.text
        return await waiting


def _next_pending_approval(after: int) -> int:
    """Run in a thread of its own, so its database connection is closed before it ends."""
    try:
        for _ in range(100):
            found = ApprovalRequest.objects.filter(pk__gt=after, status="pending").values_list("pk", flat=True).first()
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError("the second call opened no approval")
    finally:
        connection.close()


async def _listed_then_called(url: str, key: str) -> list[str]:
    async with mcp_client(url, key) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        await client.call_tool("crm.lookup_customer", {"customer_id": "c-1"})
        return listed


def test_a_call_records_the_tools_its_session_listed(mcp_live_server, catalog, acme_key, downstream):
    listed = asyncio.run(_listed_then_called(mcp_live_server.url, acme_key))
    recorded = ToolCall.objects.get().decision["exposed_tools"]
    assert recorded == {"names": listed, "source": "agent"} and "check_approval" in listed
    ToolCall.objects.all().delete()
    asyncio.run(_calls(mcp_live_server.url, acme_key, [("crm.lookup_customer", {"customer_id": "c-2"})]))
    unlisted = ToolCall.objects.get().decision["exposed_tools"]
    assert unlisted["source"] == "gate" and "crm.lookup_customer" in unlisted["names"]
