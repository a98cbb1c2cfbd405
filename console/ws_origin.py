"""The websocket origin check: the browser's Origin must be exactly this server's origin.

Channels' AllowedHostsOriginValidator compares host names only, so `http://airlock.example:9999` or
`http://airlock.example` (on an https console) would pass. Here, as Django's CSRF check does for forms,
an origin is accepted when its scheme, host and port equal the request's own (the scheme from the
connection or SECURE_PROXY_SSL_HEADER, the Host header valid under ALLOWED_HOSTS), or when it is one
of CSRF_TRUSTED_ORIGINS (same scheme and port; `https://*.example.com` covers subdomains, as Django's).
A missing or `null` Origin is refused.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]  # what Django allows with DEBUG and no ALLOWED_HOSTS


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) origin, the default port filled in; None when malformed."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path or parts.query or parts.username:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _is_secure(scope: dict, headers: dict[bytes, bytes]) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header:
        name, secure_value = proxy_header
        value = headers.get(name.removeprefix("HTTP_").lower().replace("_", "-").encode(), b"").decode("latin1")
        return value.split(",", 1)[0].strip() == secure_value
    return False


def _trusted(origin: tuple[str, str, int]) -> bool:
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        trusted = _origin_parts(entry.replace("://*.", "://wildcard.", 1))
        if trusted is None or trusted[0] != scheme or trusted[2] != port:
            continue
        if "://*." in entry:
            if is_same_domain(host, "." + trusted[1].removeprefix("wildcard.")):
                return True
        elif trusted[1] == host:
            return True
    return False


def origin_allowed(scope: dict) -> bool:
    headers = dict(scope.get("headers") or [])
    try:
        origin_header = headers.get(b"origin", b"").decode("ascii")
        host_header = headers.get(b"host", b"").decode("ascii")
    except UnicodeDecodeError:
        return False
    origin = _origin_parts(origin_header)
    if origin is None:
        return False
    if _trusted(origin):
        return True
    own = _origin_parts(f"{'https' if _is_secure(scope, headers) else 'http'}://{host_header}")
    host, _ = split_domain_port(host_header)
    allowed_hosts = settings.ALLOWED_HOSTS or (DEBUG_HOSTS if settings.DEBUG else [])
    return own is not None and bool(host) and validate_host(host, allowed_hosts) and origin == own


class ExactOriginValidator:
    """ASGI middleware for websocket routes: refuses (closes) a connection whose Origin is not exactly ours."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("ExactOriginValidator guards websocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
