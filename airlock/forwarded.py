"""The client's address behind the front door, for the WSGI process: the same rule uvicorn applies to the
streaming process with `--proxy-headers` and FORWARDED_ALLOW_IPS.

Granian passes the connection's peer as REMOTE_ADDR; behind the front door that is the proxy. Only a
connection from an address or network in FORWARDED_ALLOW_IPS may name the client: then REMOTE_ADDR becomes
the right-most X-Forwarded-For entry that is not itself a trusted proxy (each proxy appends the address it
saw, so what lies left of the last untrusted entry was written by the client and proves nothing). The
login lock and the key-guessing limit count by this address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable], Iterable[bytes]]
DEFAULT_TRUSTED = "127.0.0.1"  # uvicorn's default for FORWARDED_ALLOW_IPS


class TrustedProxies:
    """FORWARDED_ALLOW_IPS: comma-separated addresses and networks. `*` is refused: anyone could then pick
    the address the limits count by."""

    def __init__(self, listed: str) -> None:
        entries = [entry.strip() for entry in listed.split(",") if entry.strip()]
        if "*" in entries:
            raise ValueError("FORWARDED_ALLOW_IPS must list the proxies' addresses, not '*'")
        self.networks = [ipaddress.ip_network(entry, strict=False) for entry in entries]

    def __contains__(self, address: str) -> bool:
        try:
            parsed = ipaddress.ip_address(address.strip())
        except ValueError:
            return False
        return any(parsed in network for network in self.networks)

    def client(self, forwarded_for: str) -> str:
        """The right-most entry no trusted proxy wrote; the left-most when every entry is a proxy."""
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        for entry in reversed(entries):
            if entry not in self:
                return entry
        return entries[0] if entries else ""


class ForwardedFor:
    """WSGI middleware: REMOTE_ADDR from X-Forwarded-For, on connections from a trusted proxy only."""

    def __init__(self, app: WSGIApp, trusted: TrustedProxies) -> None:
        self.app, self.trusted = app, trusted

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        forwarded_for = environ.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded_for and environ.get("REMOTE_ADDR", "") in self.trusted:
            client = self.trusted.client(forwarded_for)
            if client:
                environ["REMOTE_ADDR"] = client
        return self.app(environ, start_response)


__all__ = ["DEFAULT_TRUSTED", "ForwardedFor", "TrustedProxies"]
