"""Every admin and owner action checks the role, not only the login.

Generated from the URL configuration: every console (HTML) route and every approver-side API route
is POSTed by a member of acme who holds only the viewer role and belongs to no owning team, and again
by one who holds only the auditor role (who reads the decision history and may change nothing). The
answer must be 403 (or 405 where the route does not take POST), never a change. Routes any member
may legitimately post to are listed in OPEN_TO_MEMBERS with the reason.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from console.models import Membership, Role
from tests.security.test_isolation_generated import _walk
from tests.security.world import EXEMPT, FILLERS, build_world

# name -> why a viewer may post there (it acts on their own things, or changes nothing).
OPEN_TO_MEMBERS = {
    "console:login": "the login form",
    "console:logout": "one's own session",
    "console:switch_tenant": "which of one's own tenants the console shows",
    "approvals:inbox_layout": "one's own inbox layout (cards or compact list); decides nothing",
    "console:token_list": "creates a personal access token for oneself",
    "console:token_revoke": "one's own tokens only (another's is 404)",
    "console:invitation_accept": "answers an invitation addressed to oneself (anyone else's is 404)",
    "console:invitation_decline": "answers an invitation addressed to oneself (anyone else's is 404)",
    "registry:validate": "live validation of a manifest being typed: checks, stores nothing",
    "registry_api:skill-validate": "validates a manifest, stores nothing",
    "policies:condition_check": "checks a CEL condition, stores nothing",
    "approvals_api:approval_list": "a read (GET only)",
}


# The role depends on the body: post one that names acme (or acme's team).
def _bodies(world) -> dict[str, dict]:
    from tests.runs.factories import manifest

    new_skill = manifest("acme.brand_new", schema={"type": "object", "properties": {}, "additionalProperties": False})
    new_skill["ownership"]["team"] = world.acme_team.slug
    return {
        "policies:policy_create": {"name": "p", "scope": "tenant", "tenant": world.acme.slug},
        "registry_api:skills": {"manifest": new_skill},
    }


# name -> why 404 is the right refusal there.
REFUSED_WITH_404 = {
    "traces:rule_delete": "alert rules of skills one does not own are not shown at all",
    "traces:rule_create": "alert rules of skills one does not own are not shown at all",
    "console:team_member_add": "teams one is not in are not shown at all",
    "console:team_member_remove": "teams one is not in are not shown at all",
    "console:team_maintainer": "teams one is not in are not shown at all",
    "reliability:mcp_server_review": "MCP servers of teams one is not in are not shown at all",
    "reliability:mcp_server_import": "MCP servers of teams one is not in are not shown at all",
    "reliability:mcp_server_share": "MCP servers of teams one is not in are not shown at all",
    "reliability:mcp_server_unshare": "MCP servers of teams one is not in are not shown at all",
    "reliability:mcp_tool_change_approve": "MCP servers of teams one is not in are not shown at all",
    "registry:evaluation_run": "evaluation sets of teams one is not in are not shown at all",
    "registry:evaluation_add_search": "evaluation sets of teams one is not in are not shown at all",
    "registry_api:evaluation-run": "evaluation sets of teams one is not in are not shown at all",
}
SKIP_PREFIXES = ("django-admin/", "api/schema/", "api/docs/", "healthz", "v1/")


def _agent_side(name: str) -> bool:
    return name.startswith(("runs_api:", "traces_api:", "reliability_api:", "console_api:")) or name in {
        "registry_api:snapshot-latest",
        "registry_api:public-key",
        "registry_api:skill-search",
        "runs_api:tools",
        "registry_api:manifest-schema",
    }


def _routes() -> list[tuple[str, str, tuple[str, ...]]]:
    from django.urls import get_resolver

    return [
        (route, name, params)
        for route, name, params in _walk(get_resolver())
        if name and not route.startswith(SKIP_PREFIXES) and not _agent_side(name) and name not in EXEMPT
    ]


ALL_ROUTES = _routes()
ROUTES = [route for route in ALL_ROUTES if route[1] not in OPEN_TO_MEMBERS]


def test_every_route_open_to_members_exists():
    """A stale name here would hide nothing, but a renamed route would silently lose its exemption."""
    names = {name for _, name, _ in ALL_ROUTES}
    assert set(OPEN_TO_MEMBERS) <= names, sorted(set(OPEN_TO_MEMBERS) - names)


@pytest.fixture(params=[Role.VIEWER, Role.AUDITOR])
def viewer_only(db, request):
    world = build_world()
    user = get_user_model().objects.create_user(f"acme-{request.param}-only", password="pw")
    Membership.objects.create(tenant=world.acme, user=user, role=request.param)
    client = Client()
    client.force_login(user)
    return world, client


@pytest.mark.parametrize(("route", "name", "params"), ROUTES, ids=[r[1] for r in ROUTES])
def test_a_member_without_the_role_gets_403(route, name, params, viewer_only):
    world, client = viewer_only
    kwargs = FILLERS[params](world) if params else {}
    url = reverse(name, kwargs=kwargs)
    body = _bodies(world).get(name, {})
    response = (
        client.post(url, body, content_type="application/json")
        if name.startswith("registry_api")
        else client.post(url, body)
    )
    allowed = {403, 405} | ({404} if name in REFUSED_WITH_404 else set())
    assert response.status_code in allowed, (
        f"POST {url} by a read-only member answered {response.status_code}: check the role in the view or service, "
        f"or list the route in OPEN_TO_MEMBERS with the reason ({response.content[:300]!r})"
    )
