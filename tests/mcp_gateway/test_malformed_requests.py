"""/mcp, mounted outside Django's URLconf, sent what tests/security/test_url_walk.py sends every route of it:
a NUL in the query, JSON nested 1,000 deep, a body past the upload limit, bytes that are not UTF-8, a bogus
session id, every method. Each is refused (4xx) or answered; none is a 5xx."""

from __future__ import annotations

import json

import httpx
from django.conf import settings

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "walk", "version": "1"}},
}


def _tool_call(arguments: object) -> bytes:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "crm.lookup_customer"}}
    return json.dumps({**call, "params": {**call["params"], "arguments": arguments}}).encode()


def test_no_hostile_request_to_mcp_is_a_5xx(mcp_live_server, acme_key):
    url = mcp_live_server.url
    deep = "[" * 1000 + "]" * 1000
    attempts = [
        ("POST", url + "?session=%00", json.dumps(INITIALIZE).encode(), {}),
        ("POST", url, deep.encode(), {}),
        ("POST", url, _tool_call(json.loads("[" * 150 + "]" * 150)), {}),
        ("POST", url, _tool_call({"q": "\x00"}), {}),
        (
            "POST",
            url,
            b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}',
            {},
        ),
        ("POST", url, b"\xed\xa0\x80", {}),
        ("POST", url, _tool_call({}), {"Mcp-Session-Id": "not-a-session"}),
        ("GET", url, b"", {"Mcp-Session-Id": "not-a-session"}),
        ("DELETE", url, b"", {"Mcp-Session-Id": "not-a-session"}),
        ("PUT", url, b"{}", {}),
        ("PATCH", url, b"{}", {}),
    ]
    failures = []
    with httpx.Client(timeout=30) as client:
        for key in (acme_key, None):
            auth = {"Authorization": f"Bearer {key}"} if key else {}
            for method, target, body, extra in attempts:
                headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
                answer = client.request(method, target, content=body, headers={**headers, **auth, **extra})
                if answer.status_code >= 500:
                    failures.append(f"{method} {target} key={bool(key)} {body[:60]!r}: {answer.status_code}")
    assert not failures, failures
