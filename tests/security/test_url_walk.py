"""No input makes Airlock answer 5xx: every URL pattern, for every role, with hostile values.

Each route of `get_resolver()` (the admin's too) is requested by every persona with each path parameter
replaced in turn by a NUL, a lone surrogate (its UTF-8 bytes, as they arrive on the wire) and 10**40;
with NUL, the surrogate and 10**40 in every query parameter a view reads; and with a body over
DATA_UPLOAD_MAX_MEMORY_SIZE on every write method. The other parameters name real acme objects
(tests/security/world.py FILLERS), so that the hostile one reaches as deep into the view as it can.
Django's test client with `raise_request_exception=False` sees what a client sees: a 500 is a 500.
An ASGI server may hand Django a path holding a lone surrogate itself (not its bytes): every route is also
requested that way through airlock.asgi. The websocket routes are walked through the same application;
/mcp, served by the MCP SDK outside the URLconf, in tests/mcp_gateway/test_malformed_requests.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.test import Client
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

from console.models import Role
from tests.conftest import make_user
from tests.security.world import FILLERS, World, build_world

NUL = "%00"
SURROGATE = "%ED%A0%80"  # U+D800 encoded as UTF-8 would encode it: no UTF-8 decoder accepts it
HUGE = str(10**40)  # past bigint (PostgreSQL) and SQLite's 64-bit INTEGER
HOSTILE = {"nul": NUL, "surrogate": SURROGATE, "huge": HUGE}
# Every query parameter a view reads (grep request.GET / query_params), and a few common ones.
QUERY_NAMES = [
    "tenant",
    "namespace",
    "status",
    "page",
    "cursor",
    "limit",
    "offset",
    "after",
    "from",
    "to",
    "q",
    "window",
    "tainted",
    "condition",
    "wait",
    "verdict",
    "run_id",
    "rule_id",
    "reason",
    "partial",
    "override_taint",
    "format",
    "disclosure",
    "next",
    "skill",
    "agent",
    "kind",
    "outcome",
    "since",
]
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
ADMIN_PREFIX = "django-admin/"  # Django's admin serves every method but POST as a GET: POST is its one write
# The walk lowers the limit (the mechanism is the same) so that a thousand oversized bodies cost nothing;
# test_body_limits.py sends real ones past the production limit.
WALK_UPLOAD_LIMIT = 1024
OVERSIZED = b'{"a": "' + b"x" * WALK_UPLOAD_LIMIT + b'"}'
ROLES = ("anonymous", "agent", "approver", "owner", "tenant_admin", "platform_admin")


@dataclass(frozen=True)
class Route:
    """One URL pattern: its path as a list of literal text and parameter names, and its view's name."""

    parts: tuple[str, ...]  # literal text, and "<name>" for a parameter
    params: tuple[str, ...]
    name: str
    view: Callable

    def url(self, values: dict[str, str]) -> str:
        return "/" + "".join(values[p[1:-1]] if p.startswith("<") and p.endswith(">") else p for p in self.parts)


PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)")


def _parts(pattern: RoutePattern | RegexPattern) -> list[str]:
    text = str(pattern._route) if isinstance(pattern, RoutePattern) else str(pattern._regex)
    if isinstance(pattern, RegexPattern):
        text = text.removeprefix("^").removesuffix("$").removesuffix("\\Z")
    parts, last = [], 0
    for match in PARAMETER.finditer(text):
        parts += [text[last : match.start()], f"<{match.group(1) or match.group(2)}>"]
        last = match.end()
    return [*parts, text[last:]]


def walk(resolver: URLResolver, prefix: tuple[str, ...] = ()) -> Iterator[Route]:
    for pattern in resolver.url_patterns:
        parts = prefix + tuple(_parts(pattern.pattern))
        if isinstance(pattern, URLResolver):
            yield from walk(pattern, parts)
        elif isinstance(pattern, URLPattern):
            params = tuple(sorted(pattern.pattern.regex.groupindex))
            yield Route(parts=parts, params=params, name=pattern.name or str(parts), view=pattern.callback)


ROUTES = list(walk(get_resolver()))


def test_the_walk_sees_every_route_including_the_admin():
    assert len(ROUTES) > 200
    assert any(r.parts[0] == ADMIN_PREFIX for r in ROUTES)
    assert any(r.parts[0] == "v1/" for r in ROUTES)
    assert {"name", "approval_id", "run_id", "call_id", "token", "tenant_slug"} <= {p for r in ROUTES for p in r.params}


def _valid_values(route: Route, world: World, filled: dict[tuple[str, ...], dict]) -> dict[str, str]:
    """Real acme objects for the route's parameters where a filler knows them (made once per set of
    parameters), else a harmless word."""
    filler = FILLERS.get(route.params)
    if filler and route.params not in filled:
        filled[route.params] = {name: str(value) for name, value in filler(world).items()}
    values = filled.get(route.params, {})
    return {name: quote(values.get(name, "1"), safe="") for name in route.params}


@pytest.fixture
def world(db) -> World:
    return build_world()


def _persona(role: str, world: World):
    if role in ("anonymous", "agent"):
        return None
    user = make_user(role, tenant=world.acme, roles=_ROLES_OF[role], superuser=role == "platform_admin")
    if role == "owner":
        world.acme_team.members.add(user)  # owns the skills the fillers create
    return user


def _client(role: str, world: World, user) -> Client:
    client = Client(raise_request_exception=False)
    if role == "agent":
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world.acme_agent_key}"
    elif user is not None:
        client.force_login(user)
    return client


_ROLES_OF = {
    "approver": [Role.APPROVER, Role.VIEWER],
    "owner": [Role.VIEWER],
    "tenant_admin": [Role.ADMIN, Role.VIEWER],
    "platform_admin": [],
}


def _reaches(route: Route, url: str) -> bool:
    """Whether the URL gets to the route's view at all: a value its converter refuses (a NUL for an id)
    makes the URL another one, which Django answers 404 before any view; the walk sends it once."""
    try:
        return resolve(url.replace(NUL, "\x00")).func is route.view
    except Resolver404:
        return False


def _requests(route: Route, valid: dict[str, str], turn: int) -> Iterator[tuple[str, str, bytes]]:
    """(method, url, body). GET with each hostile value in each parameter; each write method with an
    oversized body at real ids, and, when the view accepts it ("ANY+" below: found from those answers),
    with a hostile value in each parameter; one GET with a hostile value in every query parameter. The
    values a write method and the query get turn with `turn` (the route's and the role's index), so that
    each is sent everywhere across the roles without the whole cross product."""
    values = list(HOSTILE.values())
    url = route.url(valid)
    write_methods = ("POST",) if route.parts[0] == ADMIN_PREFIX else WRITE_METHODS
    yield "GET", url, b""
    for method in write_methods:
        yield method, url, OVERSIZED
    query = values[turn % len(values)]
    yield "GET", url + "?" + "&".join(f"{name}={query}" for name in QUERY_NAMES), b""
    unreachable_sent = False
    for p, param in enumerate(route.params):
        for value in values:
            hostile = route.url({**valid, param: value})
            if _reaches(route, hostile):
                yield "GET", hostile, b""
            elif not unreachable_sent:
                unreachable_sent = True
                yield "GET", hostile, b""
        for m, method in enumerate(write_methods):
            hostile = route.url({**valid, param: values[(turn + p + m) % len(values)]})
            if _reaches(route, hostile):
                yield f"{method}+", hostile, b"{}"


def _walk_as(role: str, world: World) -> tuple[list[str], int]:
    failures, sent = [], 0
    user = _persona(role, world)
    filled: dict[tuple[str, ...], dict] = {}
    for index, route in enumerate(ROUTES):
        client = _client(role, world, user)  # a fresh session per route: a route may have logged it out
        refused: set[str] = set()  # write methods the view answered 405
        for method, url, body in _requests(route, _valid_values(route, world, filled), index + ROLES.index(role)):
            if method.endswith("+") and method[:-1] in refused:
                continue
            response = client.generic(method.removesuffix("+"), url, body, content_type="application/json")
            sent += 1
            if response.status_code == 405:
                refused.add(method)
            if response.status_code >= 500 and not _is_health_report(url, response):
                failures.append(f"{role} {method.removesuffix('+')} {url[:160]} -> {response.status_code}")
    return failures, sent


def _is_health_report(url: str, response) -> bool:
    """/healthz answers 503 by design when a dependency is down (console/health.py)."""
    return url.startswith("/healthz") and response.status_code == 503


@pytest.mark.parametrize("role", ROLES)
def test_no_route_answers_5xx_to_hostile_input(role, world, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = WALK_UPLOAD_LIMIT
    failures, sent = _walk_as(role, world)
    assert sent > len(ROUTES) * 5
    print(f"{role}: {sent} requests")
    assert not failures, f"{len(failures)} requests answered 5xx:\n" + "\n".join(failures)


async def test_every_route_with_a_raw_lone_surrogate_through_the_asgi_app():
    from airlock.asgi import application

    failures = []
    for route in ROUTES:
        values = {name: "\ud800" for name in route.params}
        for headers in ([], [(b"authorization", b"Bearer ak_notakey_notakey")]):
            communicator = HttpCommunicator(application, "GET", route.url(values) + "x\ud800", headers=headers)
            response = await communicator.get_response(timeout=30)
            if response["status"] >= 500:
                failures.append(f"{route.url(values)} -> {response['status']}")
    assert not failures, failures


def _websocket_paths() -> list[str]:
    from airlock.routing import websocket_urlpatterns

    paths = ["/" + str(p.pattern) for p in websocket_urlpatterns]
    hostile = [path + suffix for path in paths for suffix in ("\x00", "\ud800", HUGE, "?tenant=\x00")]
    return [*paths, *hostile, "/ws/", "/ws/nowhere/"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "approver"])
async def test_every_websocket_route_with_hostile_paths_is_answered_not_crashed(signed_in, settings):
    from channels.db import database_sync_to_async

    from airlock.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if signed_in:

        def cookie() -> bytes:
            client = Client()
            client.force_login(make_user("approver", tenant=build_world().acme, roles=_ROLES_OF["approver"]))
            return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()

        headers.append((b"cookie", await database_sync_to_async(cookie)()))
    for path in _websocket_paths():
        path, _, query = path.partition("?")
        socket = WebsocketCommunicator(application, path, headers=headers)
        socket.scope["query_string"] = query.encode("utf-8", "surrogatepass")
        connected, _ = await socket.connect(timeout=30)  # raises if the application failed
        await socket.disconnect()
        assert connected == (signed_in and path == "/ws/approvals/"), path
