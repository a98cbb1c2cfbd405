"""The one guard for every request Airlock's server makes to an address someone else chose.

Webhooks, http skills, MCP servers (import and calls), job-status and reconciliation questions and
trace forwarding all send through `client()` (httpx) or `async_client()` (httpx2, for the MCP SDK).
Their transport checks every request, redirect hops included: http or https only, an allowed port
(`AIRLOCK_EGRESS_PORTS`). Their network backend resolves the host once, refuses the connection if
any address is loopback, private, link-local (cloud metadata), CGNAT, multicast, unspecified,
reserved or an IPv6 form that embeds one of those, and then connects to a vetted IP itself: a
second DNS answer (rebinding) is never asked for. TLS still names and verifies the host name.
`AIRLOCK_EGRESS_ALLOW_PRIVATE` (on while DEBUG is on) lifts the address rule, and
`AIRLOCK_EGRESS_ALLOW_HOSTS` lifts it for named hosts or networks. Clients never follow redirects.

`check_url(url)` gives forms the same verdict before anything is saved. What a user or an owner is
shown is `str(EgressRefused)` or `describe_failure(exc)`: the rule, never the downstream's own text.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
CGNAT = ipaddress.ip_network("100.64.0.0/10")
PRIVATE = tuple(
    ipaddress.ip_network(net) for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")
)  # RFC 1918, unique and site local
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressRefused(Exception):
    """A request the guard did not let out; `str()` names the rule and is safe to show anyone."""

    def __init__(self, rule: str, *, prefix: str = "the address is not allowed") -> None:
        self.rule = rule
        super().__init__(f"{prefix}: {rule}")


class HostNotFound(EgressRefused):
    """The host name does not resolve (now). Not a rule: senders treat it as unreachable and may retry."""

    def __init__(self) -> None:
        super().__init__("the host does not resolve", prefix="the address cannot be reached")


@dataclass(frozen=True)
class Policy:
    allow_private: bool = False
    ports: frozenset[int] | None = frozenset({80, 443, 8080, 8443})  # None: any port
    allow_names: frozenset[str] = frozenset()
    allow_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


def current_policy() -> Policy:
    """The deployment's policy, read on every check (tests change settings between requests)."""
    from django.conf import settings

    names, networks = set(), []
    for entry in settings.AIRLOCK_EGRESS_ALLOW_HOSTS:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    ports = settings.AIRLOCK_EGRESS_PORTS
    return Policy(
        # AIRLOCK_ALLOW_PRIVATE_CALLBACKS is the old name: either switch turned off refuses private addresses.
        allow_private=settings.AIRLOCK_EGRESS_ALLOW_PRIVATE and settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS,
        ports=None if ports is None else frozenset(ports),
        allow_names=frozenset(names),
        allow_networks=tuple(networks),
    )


# --- the rules ---------------------------------------------------------------------------------


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: mapped, compatible, NAT64, 6to4 or Teredo."""
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip in IPV4_COMPATIBLE or any(ip in net for net in NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour:
        return ip.sixtofour
    if ip.teredo:
        return ip.teredo[1]
    return None


def address_rule(ip: IPAddress) -> str | None:
    """Which rule refuses this address, or None for a public one."""
    if isinstance(ip, ipaddress.IPv6Address) and not (ip.is_loopback or ip.is_unspecified):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return address_rule(inner)  # the IPv4 address is where the packets end up
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (cloud metadata)"
    if ip in CGNAT:
        return "shared address space (CGNAT)"
    if ip.is_multicast:
        return "multicast"
    if any(ip in net for net in PRIVATE if net.version == ip.version):
        return "private range"
    if ip.is_reserved or ip.is_private or not ip.is_global:  # documentation, benchmarking, 240/4, 0/8...
        return "reserved range"
    return None


def _literal(host: str) -> IPAddress | None:
    """The address a host written as an IP literal means, including 2130706433, 0177.0.0.1, 0x7f.1, 127.1."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))  # the C library's forms: what a resolver accepts
    except (OSError, UnicodeError, ValueError):
        return None


def _permitted(ip: IPAddress, policy: Policy) -> bool:
    return policy.allow_private or any(ip in net for net in policy.allow_networks if ip.version == net.version)


def _check_port(port: int, policy: Policy) -> None:
    if policy.ports is not None and port not in policy.ports:
        raise EgressRefused(f"port {port} is not an allowed port")


def vetted_addresses(host: str, port: int, *, policy: Policy | None = None) -> list[str]:
    """Resolve `host` once, check every address, and return the IPs a connection may use, in order."""
    policy = policy or current_policy()
    _check_port(port, policy)
    host = host.strip("[]").lower().rstrip(".")
    if not host:
        raise EgressRefused("the URL has no host")
    literal = _literal(host)
    if literal is not None:
        infos = [str(literal)]
    else:
        try:
            infos = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except (OSError, UnicodeError) as exc:
            raise HostNotFound() from exc
    addresses = list(dict.fromkeys(infos))
    if host not in policy.allow_names:
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            rule = address_rule(ip)
            if rule and not _permitted(ip, policy):
                raise EgressRefused(rule)
    if not addresses:
        raise HostNotFound()
    return addresses


def check_url(url: str, *, resolve: bool = True, policy: Policy | None = None) -> None:
    """Raise EgressRefused unless `url` may be requested: scheme, host, port and (when `resolve`)
    every address the host resolves to now. A name that does not resolve now passes: the connection
    is checked again (and pinned) when it is made. Forms use this; the transport too, without `resolve`."""
    policy = policy or current_policy()
    try:
        parts = urlsplit(str(url).strip())
        port = parts.port
    except ValueError as exc:
        raise EgressRefused("the URL is malformed") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise EgressRefused("only http and https URLs may be requested")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise EgressRefused("the URL has no host")
    port = port or DEFAULT_PORTS[scheme]
    if resolve:
        with contextlib.suppress(HostNotFound):
            vetted_addresses(host, port, policy=policy)
        return
    _check_port(port, policy)
    literal = _literal(host)
    if literal is not None and host not in policy.allow_names:
        rule = address_rule(literal)
        if rule and not _permitted(literal, policy):
            raise EgressRefused(rule)


# --- what people are told ----------------------------------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    chain = [exc]
    while len(chain) < 6:
        following = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if following is None:
            break
        chain.append(following)
        exc = following
    return chain


def refusal_in(exc: BaseException) -> EgressRefused | None:
    """The guard's refusal inside `exc` (an exception group or a chain), if that is what failed."""
    return next((leaf for leaf in _leaves(exc) if isinstance(leaf, EgressRefused)), None)


FAILURES = (  # class names shared by httpx and httpx2, most specific first
    ("HTTPStatusError", None),
    ("ConnectTimeout", "did not accept the connection in time"),
    ("ConnectError", "refused the connection or could not be reached"),
    ("TimeoutException", "did not answer in time"),
    ("TransportError", "broke the connection"),
)


def describe_failure(exc: BaseException, *, who: str = "the endpoint") -> str:
    """A neutral account of a failed request: the rule that refused it, a status, or the kind of
    network failure. Never the exception's own text, which can quote an internal service."""
    refusal = refusal_in(exc)
    if refusal is not None:
        return str(refusal)
    for leaf in _leaves(exc):
        names = {cls.__name__ for cls in type(leaf).__mro__}
        for name, words in FAILURES:
            if name in names:
                if words is None:
                    return f"{who} answered HTTP {leaf.response.status_code}"
                return f"{who} {words}"
    return f"{who} could not be reached"


# --- the transports ----------------------------------------------------------------------------


@cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()  # loading the CA bundle costs ~40 ms: once per process


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects only to vetted addresses of the host it is asked for; TLS keeps the host name."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = vetted_addresses(host, port)
        except HostNotFound as exc:
            raise httpcore.ConnectError(str(exc)) from None  # unreachable for now, as a connection error is
        last: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last  # type: ignore[misc]  # vetted_addresses never returns an empty list

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise EgressRefused("unix sockets are not reachable")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(),
            network_backend=_PinnedBackend(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        check_url(str(request.url), resolve=False)  # every hop, a redirect's too
        return super().handle_request(request)


class _GuardedClient(httpx.Client):
    def build_request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> httpx.Request:
        check_url(str(url), resolve=False)  # before httpx parses it: `0177.0.0.1` is refused by rule, not as a typo
        return super().build_request(method, url, *args, **kwargs)


def client(*, timeout: float = 10.0, headers: dict[str, str] | None = None) -> httpx.Client:
    """An httpx client behind the guard: no environment proxies, no redirects followed."""
    return _GuardedClient(
        transport=_GuardedTransport(), timeout=timeout, headers=headers, trust_env=False, follow_redirects=False
    )


def async_client(*, headers: dict[str, str] | None = None, timeout: Any = None) -> Any:
    """An httpx2.AsyncClient behind the guard, for `streamable_http_client(url, http_client=...)`.
    The MCP SDK follows same-origin redirects itself; each hop still passes this transport."""
    import httpx2

    client_class, transport_class = _async_classes()
    if timeout is None:
        timeout = httpx2.Timeout(30.0, read=300.0)  # the MCP SDK's own defaults (create_mcp_http_client)
    return client_class(
        transport=transport_class(), headers=headers, timeout=timeout, trust_env=False, follow_redirects=False
    )


@cache
def _async_classes() -> tuple[type, type]:
    """The httpx2 twins of the classes above, built on first use: only MCP calls need httpx2 (~60 ms to import)."""
    import anyio
    import httpcore2
    import httpx2

    context = httpx2.create_ssl_context()

    class PinnedAsyncBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            try:
                addresses = await anyio.to_thread.run_sync(vetted_addresses, host, port, abandon_on_cancel=True)
            except HostNotFound as exc:
                raise httpcore2.ConnectError(str(exc)) from None
            last: Exception | None = None
            for address in addresses:
                try:
                    return await self._inner.connect_tcp(
                        address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                    )
                except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                    last = exc
            raise last  # type: ignore[misc]

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            raise EgressRefused("unix sockets are not reachable")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
        def __init__(self) -> None:
            super().__init__(verify=context, trust_env=False)
            self._pool = httpcore2.AsyncConnectionPool(
                ssl_context=context,
                network_backend=PinnedAsyncBackend(),
                max_connections=100,
                max_keepalive_connections=20,
                keepalive_expiry=5.0,
            )

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            check_url(str(request.url), resolve=False)
            return await super().handle_async_request(request)

    class GuardedAsyncClient(httpx2.AsyncClient):
        def build_request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> httpx2.Request:
            check_url(str(url), resolve=False)
            return super().build_request(method, url, *args, **kwargs)

    return GuardedAsyncClient, GuardedAsyncTransport
