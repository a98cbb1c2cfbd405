"""`/mcp` in the ASGI app: every request is authenticated with the agent's key, then served by the MCP
SDK's streamable HTTP session manager.

uvicorn serves Channels' router, which takes no lifespan events, so the session manager is started on
the first request of each event loop (one per uvicorn worker) and lives as long as that loop. Sessions
live in the worker's memory: behind several workers or hosts, route a session's requests to one of them
(sticky sessions on the `Mcp-Session-Id` header).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_gateway.auth import KeyRefusal, agent_for
from mcp_gateway.server import AGENT_SCOPE_KEY, MAX_SESSIONS, mcp_server, released

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


def _header(scope: Scope, name: bytes) -> str:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key == name), "")


class McpGateway:
    """The ASGI app behind `/mcp`."""

    def __init__(self) -> None:
        self._running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Running] = weakref.WeakKeyDictionary()

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        running = self._running.get(loop)
        if running is None:
            running = self._running[loop] = _Running(
                manager=StreamableHTTPSessionManager(app=mcp_server, max_sessions=MAX_SESSIONS)
            )
            running.task = loop.create_task(self._serve(running))
        await running.ready.wait()
        return running.manager

    @staticmethod
    async def _serve(running: _Running) -> None:
        async with running.manager.run():
            running.ready.set()
            await asyncio.Event().wait()  # until the loop ends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") or ("", 0)
        agent = await released(agent_for, authorization=_header(scope, b"authorization"), remote_addr=client[0])
        if isinstance(agent, KeyRefusal):
            await _refuse(send, agent)
            return
        # The SDK binds a session to the principal that opened it: another agent's key gets 404 for it.
        principal = AuthenticatedUser(AccessToken(token="", client_id=f"agent:{agent.pk}", scopes=[]))
        manager = await self._manager()
        await manager.handle_request({**scope, AGENT_SCOPE_KEY: agent, "user": principal}, receive, send)


def with_mcp(http_app: ASGIApp) -> ASGIApp:
    """`http_app` with `/mcp` served by the MCP gateway."""
    gateway = McpGateway()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
            await gateway(scope, receive, send)
        else:
            await http_app(scope, receive, send)

    return app
