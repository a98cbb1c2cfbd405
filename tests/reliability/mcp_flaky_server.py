"""A real MCP server (streamable HTTP) that misbehaves on purpose, for the execution-plane tests.

Run: python mcp_flaky_server.py <port>. It counts executions per tool and idempotency key (sent by
Airlock in the request `_meta`), so tests can prove that nothing ran twice.
"""

import sys
import threading
from collections import Counter

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

server = MCPServer("Flaky Desk")
executions: Counter = Counter()
notes: dict[str, dict] = {}
seen_headers: dict[str, str] = {}
slow_writes_may_finish = threading.Event()


def _key(ctx: Context) -> str:
    meta = ctx.request_context.meta or {}
    return str(
        (
            meta.get("airlock/idempotency_key")
            if isinstance(meta, dict)
            else getattr(meta, "get", lambda *_: "")("airlock/idempotency_key")
        )
        or ""
    )


def _remember_headers(ctx: Context) -> None:
    request = ctx.request_context.request
    if request is not None:
        seen_headers["authorization"] = request.headers.get("authorization", "")
        seen_headers["x-server-secret"] = request.headers.get("x-server-secret", "")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def lookup(item_id: str, ctx: Context) -> dict:
    """Read one item. Items starting with 'missing' are not found (a typed variant, not an error)."""
    executions["lookup"] += 1
    _remember_headers(ctx)
    if item_id.startswith("missing"):
        return {"found": False, "item_id": item_id}
    return {
        "found": True,
        "item_id": item_id,
        "name": f"Item {item_id}",
        "html": '<b>ok</b><script>alert(1)</script><a href="javascript:alert(2)" onclick="x()">x</a>',
    }


@server.tool()
def bad_shape(item_id: str) -> dict:
    """Returns the wrong shape on purpose."""
    executions["bad_shape"] += 1
    return {"unexpected": True}


@server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False))
def create_note(text: str, ctx: Context) -> dict:
    """Write a note; text 'slow' makes it wait until the `release` tool is called (it still succeeds)."""
    key = _key(ctx)
    executions["create_note"] += 1
    executions[f"create_note:{key}"] += 1
    if text == "slow":
        slow_writes_may_finish.wait(timeout=30)
    notes[key] = {"note_id": f"note_{len(notes) + 1}", "text": text}
    return notes[key]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def note_status(idempotency_key: str) -> dict:
    """Reconciliation: what happened to the write with this idempotency key."""
    if idempotency_key in notes:
        return {"status": "succeeded", "result": notes[idempotency_key]}
    return {"status": "not_found"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def counts() -> dict:
    """Test helper: executions so far, the notes written and the last credential headers seen."""
    return {"executions": dict(executions), "notes": sorted(notes), "headers": dict(seen_headers)}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def refuse(message: str, jsonrpc_code: int = 0) -> dict:
    """Fails on purpose, saying `message`: as a tool error (`isError`), or as a JSON-RPC error with `jsonrpc_code`."""
    executions["refuse"] += 1
    if jsonrpc_code:
        raise MCPError(jsonrpc_code, message)
    raise ToolError(message)


@server.tool()
def release() -> dict:
    """Test helper: slow writes finish now."""
    slow_writes_may_finish.set()
    return {"released": True}


if __name__ == "__main__":
    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
