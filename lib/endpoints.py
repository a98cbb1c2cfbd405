"""The endpoint an adapter URI talks to: one normal form for breakers, credential bindings and reviews.

`https://API.example.com:443/v1/x` → `https://api.example.com`; `http://u:p@host:8080/a` →
`http://host:8080` (user info never names the host: `https://good.example@evil.example` is
`https://evil.example`); `mcp://billing-desk/create_refund` → `mcp://billing-desk`; anything else
(`python:demo.read_profile`, `client:notes`) is its own endpoint: in-process code or the agent.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_of(uri: str) -> str:
    """The origin (`scheme://host[:port]`) of an http(s) URI, `mcp://<server>` of an MCP one, else the URI."""
    uri = (uri or "").strip()
    scheme = uri.split(":", 1)[0].lower()
    if scheme in DEFAULT_PORTS:
        parts = urlsplit(uri)
        host = (parts.hostname or "").lower()
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:  # a malformed port names no endpoint anyone could bind
            return uri
        if port is None or port == DEFAULT_PORTS[scheme]:
            return f"{scheme}://{host}"
        return f"{scheme}://{host}:{port}"
    if scheme == "mcp":
        return "mcp://" + uri[len("mcp://") :].split("/", 1)[0].lower()
    return uri


def leaves_airlock(uri: str) -> bool:
    """True when calls on this adapter are sent to another service (http(s), MCP), not run in-process."""
    return (uri or "").split(":", 1)[0].lower() in (*DEFAULT_PORTS, "mcp")
