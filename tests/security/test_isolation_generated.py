"""Tenant isolation generated from the URL configuration, not from a hand-kept list.

Every route of `get_resolver()` that takes a path parameter is filled with ids of objects of
tenant acme (tests/security/world.py FILLERS) and requested, GET and POST, by a globex user who
holds every role in globex and, for API routes, by a globex agent. Each answer must be 401, 403,
404 or 405 (or a redirect to the login page for a client the page does not know), and never carry
acme's data. A route whose parameters have no filler fails the suite with the line to add.
The websocket routes are walked too: an outsider's socket never hears of acme's requests.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from console.models import Membership, Role
from console.services import create_agent
from tests.security.world import EXEMPT, FILLERS, GLOBAL_READS, build_world

NOT_DATA = {401, 403, 404, 405}
INSIDER_QUERY = {"registry:diff": "?from=1.0.0&to=1.0.0", "registry_api:skill-diff": "?from=1.0.0&to=1.0.0"}
SKIP_PREFIXES = ("django-admin/",)  # Django's admin: staff only, has its own permission system


def _walk(resolver: URLResolver, prefix: str = "", namespace: str | None = None):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
            yield from _walk(pattern, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace and pattern.name else pattern.name
            yield prefix + str(pattern.pattern), name, tuple(sorted(pattern.pattern.regex.groupindex))


def routes_with_parameters() -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (route, name, params)
        for route, name, params in _walk(get_resolver())
        if params and not route.startswith(SKIP_PREFIXES)
    ]


ROUTES = routes_with_parameters()
FILLABLE = [r for r in ROUTES if r[1] not in EXEMPT]


def _is_api(route: str) -> bool:
    return route.startswith(("api/", "v1/"))


def test_every_route_with_a_parameter_has_a_filler():
    unnamed = [route for route, name, _ in ROUTES if not name]
    assert not unnamed, f"name these routes so that the isolation suite can reverse them: {unnamed}"
    missing = sorted({(name, params) for _, name, params in FILLABLE if params not in FILLERS})
    assert not missing, (
        "New routes take parameters the generated isolation suite cannot fill: "
        + "; ".join(f"{name} needs FILLERS[{params!r}]" for name, params in missing)
        + ". Add a filler in tests/security/world.py that creates the object in tenant acme and returns the kwargs."
    )


def test_the_walk_sees_every_app():
    apps = {name.split(":")[0] for _, name, _ in ROUTES}
    assert {"console", "registry", "policies", "runs", "approvals", "traces", "runs_api", "approvals_api"} <= apps


@pytest.fixture
def world(db):
    return build_world()


@pytest.fixture
def outsiders(world):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("globex-everything", password="pw")
    for role in Role:
        Membership.objects.create(tenant=world.globex, user=user, role=role)
    session = Client()
    session.force_login(user)
    _, key = create_agent(tenant=world.globex, name="globex-bot", role="support")
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return {"user": session, "agent": agent}


def _leaks(response, world, kwargs: dict) -> list[str]:
    body = response.content.decode(errors="replace")
    markers = [world.acme.name, world.acme_user.username, world.acme_agent.name]
    markers += [str(v) for v in kwargs.values() if len(str(v)) >= 8 and str(v) not in response.request["PATH_INFO"]]
    return [m for m in markers if m in body]


@pytest.mark.parametrize(("route", "name", "params"), FILLABLE, ids=[f"{r[1]}" for r in FILLABLE])
def test_outsiders_get_no_data(route, name, params, world, outsiders):
    kwargs = FILLERS[params](world)
    url = reverse(name, kwargs=kwargs)
    clients = ["user", "agent"] if _is_api(route) else ["user"]
    for who in clients:
        for method in ("get", "post"):
            client = outsiders[who]
            response = (
                client.get(url)
                if method == "get"
                else client.post(url, {}, format="json")
                if who == "agent"
                else client.post(url, {})
            )
            status = response.status_code
            to_login = status == 302 and response["Location"].startswith(settings.LOGIN_URL)
            catalog_read = method == "get" and status == 200 and set(params) <= GLOBAL_READS
            assert status in NOT_DATA or to_login or catalog_read, f"{method.upper()} {url} as a globex {who}: {status}"
            assert not _leaks(response, world, kwargs), f"{method.upper()} {url} as a globex {who} shows acme data"


@pytest.mark.parametrize(("route", "name", "params"), FILLABLE, ids=[f"{r[1]}" for r in FILLABLE])
def test_acme_itself_reaches_the_route(route, name, params, world):
    """The control: the filler names a real object, so the outsider's 404 means isolation, not a typo."""
    url = reverse(name, kwargs=FILLERS[params](world)) + INSIDER_QUERY.get(name, "")
    if _is_api(route) and not name.startswith(("approvals_api", "policies_api", "registry_api")):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
    else:
        client = Client()
        client.force_login(world.acme_user)
    response = client.get(url)
    if response.status_code == 405:
        response = client.post(url, {})
    assert response.status_code != 404, f"{url} is 404 for acme too: the filler for {params} names nothing"


# --- websockets ---------------------------------------------------------------------------------


def _websocket_routes() -> list[str]:
    from airlock.routing import websocket_urlpatterns

    return ["/" + str(p.pattern) for p in websocket_urlpatterns]


def test_every_websocket_route_is_covered():
    assert set(_websocket_routes()) <= {"/ws/approvals/"}, (
        "A new websocket route: add it to test_outsider_sockets_hear_nothing_of_acme with what it broadcasts"
    )


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


@pytest.mark.django_db(transaction=True)
async def test_outsider_sockets_hear_nothing_of_acme(settings):
    from channels.layers import channel_layers
    from django.contrib.auth import get_user_model

    from airlock.asgi import application
    from tests.approvals.factories import open_request

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    world = await database_sync_to_async(build_world)()

    def outsider():
        user = get_user_model().objects.create_user("globex-ws", password="pw")
        for role in Role:
            Membership.objects.create(tenant=world.globex, user=user, role=role)
        return user

    sockets = {}
    for who, user in (("acme", world.acme_user), ("globex", await database_sync_to_async(outsider)())):
        cookie = await database_sync_to_async(_cookie)(user)
        sockets[who] = WebsocketCommunicator(
            application,
            "/ws/approvals/",
            headers=[
                (b"origin", b"http://testserver"),
                (b"host", b"testserver"),
                (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()),
            ],
        )
        assert (await sockets[who].connect())[0]
    request = await database_sync_to_async(open_request)(tenant=world.acme, agent=world.acme_agent)
    heard = await sockets["acme"].receive_json_from(timeout=3)
    assert heard["approval_id"] == request.pk  # the control: the broadcast happened
    assert await sockets["globex"].receive_nothing(timeout=0.5)  # waits the half second itself
    for socket in sockets.values():
        await socket.disconnect()
    channel_layers.backends.clear()
