"""`/mcp` in the ASGI app: every request is authenticated with the agent's key, then served by the MCP
SDK's streamable HTTP session manager in stateless mode: nothing of a session stays in the process.

Airlock keeps the sessions itself (mcp_gateway/sessions.py, in the cache): it issues the Mcp-Session-Id
on a successful `initialize`, checks on every later request that the id is a live session of the same
agent (else 404, as the SDK answers an unknown session), and ends it on DELETE. So any process, or worker,
continues any session: no sticky routing. A GET (the stream for messages the server starts) is answered
405, as the protocol allows: Airlock sends progress on each call's own response stream and nothing else.

uvicorn serves Channels' router, which takes no lifespan events, so the session manager is started on
the first request of each event loop (one per uvicorn worker) and lives as long as that loop.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console.models import Agent
from mcp_gateway import sessions
from mcp_gateway.auth import KeyRefusal, agent_for
from mcp_gateway.server import AGENT_SCOPE_KEY, SESSION_SCOPE_KEY, mcp_server, released

MCP_PATH = "/mcp"


@dataclass
class _Running:
    manager: StreamableHTTPSessionManager
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


async def _refuse(send: Send, refusal: KeyRefusal) -> None:
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="airlock"')]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(refusal.retry_after).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(refusal.body).encode()})


async def _answer(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """A JSON-RPC error without a request id, as the SDK's own session refusals look."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), *headers]}
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key == name), "")


def _is_legacy(scope: Scope) -> bool:
    """The protocol eras that have sessions (the SDK's own test): no version header, or a handshake version."""
    version = _header(scope, MCP_PROTOCOL_VERSION_HEADER.lower().encode())
    return not version or version in HANDSHAKE_PROTOCOL_VERSIONS


async def _peeked(receive: Receive) -> tuple[bytes, Receive]:
    """The request body (up to the SDK's limit, which the SDK then enforces), and a `receive` that hands
    the SDK the same body again."""
    chunks: list[bytes] = []
    size, more, first = 0, True, None
    while more and size <= DEFAULT_MAX_REQUEST_BODY_SIZE:
        message = await receive()
        if message["type"] != "http.request":
            first = message
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return first or {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return body, replay


def _is_initialize(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses: the SDK refuses it
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


class McpGateway:
    """The ASGI app behind `/mcp`."""

    def __init__(self) -> None:
        self._running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Running] = weakref.WeakKeyDictionary()

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        running = self._running.get(loop)
        if running is None:
            running = self._running[loop] = _Running(
                manager=StreamableHTTPSessionManager(app=mcp_server, stateless=True)
            )
            running.task = loop.create_task(self._keep_running(running))
        await running.ready.wait()
        return running.manager

    @staticmethod
    async def _keep_running(running: _Running) -> None:
        async with running.manager.run():
            running.ready.set()
            await asyncio.Event().wait()  # until the loop ends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") or ("", 0)
        agent = await released(agent_for, authorization=_header(scope, b"authorization"), remote_addr=client[0])
        if isinstance(agent, KeyRefusal):
            await _refuse(send, agent)
            return
        scope = {**scope, AGENT_SCOPE_KEY: agent}
        if not _is_legacy(scope):  # the 2026-era protocol: each request stands alone, no session
            await self._handled(scope, receive, send)
            return
        session_id = _header(scope, MCP_SESSION_ID_HEADER.encode())
        if scope["method"] == "GET" or (scope["method"] == "DELETE" and not session_id):
            await _answer(send, 405, "Method Not Allowed", [(b"allow", b"POST" + (b", DELETE" if session_id else b""))])
            return
        if session_id:
            await self._in_session(session_id, agent, scope, receive, send)
            return
        body, receive = await _peeked(receive)
        if scope["method"] == "POST" and _is_initialize(body):
            await self._opening(agent, scope, receive, send)
        else:  # a request without a session and not opening one stands alone, as a 2026-era one does
            await self._handled(scope, receive, send)

    async def _handled(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = await self._manager()
        await manager.handle_request(scope, receive, send)

    async def _in_session(self, session_id: str, agent: Agent, scope: Scope, receive: Receive, send: Send) -> None:
        session = await released(sessions.session_for, session_id=session_id, agent_id=agent.pk)
        if session is None:  # unknown, expired, or another agent's: one answer for all three
            await _answer(send, 404, "Session not found")
            return
        if scope["method"] == "DELETE":
            await released(sessions.close_session, session_id=session_id)
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self._handled({**scope, SESSION_SCOPE_KEY: session}, receive, send)

    async def _opening(self, agent: Agent, scope: Scope, receive: Receive, send: Send) -> None:
        """`initialize`: a new session, whose id goes back on the answer; dropped again if initialize fails."""
        session_id = await released(sessions.open_session, agent_id=agent.pk)
        status = 0

        async def with_session_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if status < 400:
                    header = (MCP_SESSION_ID_HEADER.encode(), session_id.encode())
                    message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        try:
            await self._handled(scope, receive, with_session_id)
        finally:
            if not 200 <= status < 400:
                await released(sessions.close_session, session_id=session_id)


def with_mcp(http_app: ASGIApp) -> ASGIApp:
    """`http_app` with `/mcp` served by the MCP gateway."""
    gateway = McpGateway()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
            await gateway(scope, receive, send)
        else:
            await http_app(scope, receive, send)

    return app
