"""The MCP server: `tools/list` and `tools/call` for the agent whose key the request carries (checked by
mcp_gateway/asgi.py, which puts the agent, and the request's MCP session if it has one, in the ASGI scope),
with one run per MCP session. The session lives in the cache (mcp_gateway/sessions.py), not in this process:
any process serves any of its requests.

A request without a session (the 2026-07-28 protocol sends no Mcp-Session-Id; each request stands alone)
shares nothing with any other request, of its agent or another: each sessionless `tools/call` gets a run
of its own, and a sessionless `tools/list` starts none (it lists the newest snapshot, which the next
call's run will pin).

Calls go to the gate one at a time per session, whichever processes serve them (in the order they
arrive at each), except reads, which may overlap (as in one REST batch). A confirm verdict waits for
the tenant's approvers, sending progress notifications, for at most AIRLOCK_MCP_APPROVAL_WAIT_SECONDS;
then the answer is 'approval pending' and `check_approval` fetches the outcome later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from mcp.server import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from console.models import Agent
from lib import clock
from mcp_gateway import calls, catalog, results, sessions

AGENT_SCOPE_KEY = "airlock.agent"
SESSION_SCOPE_KEY = "airlock.mcp_session"
END_USER_HEADER = "x-airlock-end-user"
IDEMPOTENCY_META_KEY = "airlock/idempotency_key"
TAINT_META_KEY = "airlock/taint"
FIRST_POLL_INTERVAL = 0.25
MAX_POLL_INTERVAL = 2.0

T = TypeVar("T")


async def released(function: Callable[..., T], /, **kwargs: Any) -> T:
    """A sync use case in Django's sync thread; afterwards its database connection goes back (to the pool),
    so that a session waiting for a person holds none."""

    def work() -> T:
        try:
            return function(**kwargs)
        finally:
            if not connection.in_atomic_block:  # a test's transaction, not a request's connection
                connection.close()

    return await sync_to_async(work)()


def _agent(ctx) -> Agent:
    return ctx.request.scope[AGENT_SCOPE_KEY]


def _session(ctx) -> sessions.Session | None:
    """The request's MCP session as mcp_gateway/asgi.py found it (its agent's, checked there), or None when
    it has none: never a state shared by sessionless requests."""
    return ctx.request.scope.get(SESSION_SCOPE_KEY)


async def _run_of(session: sessions.Session, agent: Agent, ctx) -> UUID:
    """The session's run, started by the first of its requests to need one, on whichever process."""
    if session.run_id is not None:
        return session.run_id
    async with sessions.turn(session.session_id, "open"):
        run_id = await released(sessions.run_of, session_id=session.session_id)
        if run_id is None:
            run_id = await _start_run(agent, ctx, task="MCP session")
            await released(sessions.set_run, session_id=session.session_id, run_id=run_id)
    return run_id


async def _start_run(agent: Agent, ctx, *, task: str) -> UUID:
    end_user = ctx.request.headers.get(END_USER_HEADER) or f"mcp:{agent.name}"
    return await released(calls.start_session_run, agent=agent, end_user=end_user, task=task)


async def _list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    """The session's run starts here if no call started it: its pinned snapshot fixes the list. Without a
    session no run starts: nothing would tie it to the calls that follow."""
    agent = _agent(ctx)
    session = _session(ctx)
    if session is None:
        return types.ListToolsResult(tools=await released(catalog.tools_for, agent=agent, run_id=None))
    run_id = await _run_of(session, agent, ctx)
    tools = await released(catalog.tools_for, agent=agent, run_id=run_id)
    await released(sessions.remember_listed, session_id=session.session_id, names=[tool.name for tool in tools])
    return types.ListToolsResult(tools=tools)


def _proposed(number: int, params: types.CallToolRequestParams, meta: dict) -> dict:
    call = {"call_id": f"mcp-{number}", "name": params.name, "arguments": params.arguments or {}}
    if isinstance(meta.get(IDEMPOTENCY_META_KEY), str):
        call["idempotency_key"] = meta[IDEMPOTENCY_META_KEY]
    if meta.get(TAINT_META_KEY):
        call["taint"] = meta[TAINT_META_KEY]
    return call


async def _call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    agent = _agent(ctx)
    if params.name == catalog.CHECK_APPROVAL:
        return await _check_approval(ctx, agent, params.arguments or {})
    session = _session(ctx)
    if session is None:
        # Sessionless: a session of this one call, so a run of its own; what its model was shown is unknown
        # here (listed stays None), so the gate records what the run offered.
        run_id, number = await _start_run(agent, ctx, task="MCP call without a session"), 1
    else:
        run_id = await _run_of(session, agent, ctx)
        number = await released(sessions.next_call_number, session_id=session.session_id)
    effects = await released(catalog.effects_for, agent=agent, run_id=run_id)
    call = _proposed(number, params, dict(ctx.meta or {}))
    proposal = {"agent": agent, "run_id": run_id, "call": call, "exposed": session.listed if session else None}
    if effects.get(params.name) == "read" or session is None:
        result = await released(calls.propose_call, **proposal)
    else:
        async with sessions.turn(session.session_id, "write"):
            result = await released(calls.propose_call, **proposal)
    if result.get("status") == "approval_required":
        return await _await_decision(ctx, agent, result["approval_id"])
    return results.from_gate(result)


async def _check_approval(ctx, agent: Agent, arguments: dict) -> types.CallToolResult:
    approval_id = arguments.get("approval_id")
    if not isinstance(approval_id, int) or isinstance(approval_id, bool) or approval_id < 1:
        return results.error(
            "validation",
            "invalid_arguments",
            "approval_id must be the approval's id (a positive integer).",
            fields=[{"field": "approval_id", "message": "positive integer"}],
        )
    return await _await_decision(ctx, agent, approval_id)


async def _await_decision(ctx, agent: Agent, approval_id: int) -> types.CallToolResult:
    """The executed result (or the refusal) once recorded, else 'approval pending' after the bounded wait."""
    wait = settings.AIRLOCK_MCP_APPROVAL_WAIT_SECONDS
    started = clock.monotonic()
    interval = FIRST_POLL_INTERVAL
    while True:
        state = await released(calls.approval_state, agent=agent, approval_id=approval_id)
        if state is None:
            return results.error("not_found", "unknown_approval", f"There is no approval {approval_id} for this agent.")
        if state.result is not None:
            return results.from_gate(state.result)
        waited = clock.monotonic() - started
        if waited >= wait:
            return results.pending(state, waited_s=waited)
        await ctx.session.report_progress(
            waited, wait, f"Waiting for the tenant's approvers to decide approval {approval_id} ({state.status})."
        )
        await clock.asleep(min(interval, wait - waited))
        interval = min(interval * 1.5, MAX_POLL_INTERVAL)


async def _discover(ctx, params: types.RequestParams | None) -> types.DiscoverResult:
    """Handshake versions only: the session (Mcp-Session-Id) is what ties calls to one run, and 2026-era
    requests have none. Clients that probe `server/discover` fall back to `initialize`."""
    return types.DiscoverResult(
        supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS), capabilities=mcp_server.get_capabilities()
    )


mcp_server = Server(
    "airlock",
    title="Airlock",
    instructions="Every call goes through Airlock's gate: policies, approvals by people, idempotency and the "
    "audit trail. A call may answer 'approval pending'; then call check_approval later instead of retrying.",
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
)
mcp_server.add_request_handler("server/discover", types.RequestParams, _discover)
