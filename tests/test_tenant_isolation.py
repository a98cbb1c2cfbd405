"""Cross-tenant isolation: every route that takes an id or a tenant slug answers 404 to outsiders.

One table for the whole project. Each row is a `Route`:

    Route(url_name, build, method="get", client="user")

- `url_name`: the name to `reverse()`, with its namespace ("console:agent_revoke").
- `build(world) -> dict`: creates whatever object the route names **in tenant acme** and
  returns the URL kwargs. `world` has `acme` (Tenant), `acme_user` (a user holding every role
  in acme), `acme_agent` (an agent of acme) and `globex`. Keep builders to a line or two; put
  helpers in your app's tests if they grow.
- `method`: "get", "post", "put", "patch" or "delete". Writes are sent with an empty JSON body.
- `client`: "user" (a session of a globex user who holds every role in globex) or
  "agent" (the API key of a globex agent).

Two tests run over the table: the outsider gets 404, and the insider (acme_user, or acme_agent
for "agent" rows) does not, so a typo in a row cannot pass by 404ing for everyone.

To add your app's routes: append rows to ROUTES below, in a block with a comment naming your
app. Nothing else to change.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Agent, Membership, Role, Team, Tenant
from console.services import create_agent, create_personal_token

pytestmark = pytest.mark.django_db


@dataclass
class World:
    acme: Tenant
    globex: Tenant
    acme_user: Any
    acme_agent: Agent
    acme_agent_key: str


class Route(NamedTuple):
    url_name: str
    build: Callable[[World], dict]
    method: str = "get"
    client: str = "user"


def _acme_member(world: World):
    user = get_user_model().objects.create_user("acme-member", password="pw")
    Membership.objects.create(tenant=world.acme, user=user, role=Role.VIEWER)
    return user


def _gate_factories():
    from tests.runs import factories

    return factories


def _acme_policy_version(world: World) -> dict:
    policy = _gate_factories().tenant_policy(world.acme)
    return {"policy_id": policy.pk, "version_id": policy.versions.get().pk}


def _traces():
    from tests.traces import isolation

    return isolation


def _acme_invitation(world: World):
    """A pending invitation to acme for acme_user, and the token of its link."""
    from tests.console.factories import invitation_with_token

    return invitation_with_token(tenant=world.acme, address=world.acme_user.username, invited_by=world.acme_user)


def _acme_team(world: World) -> Team:
    team = Team.objects.get_or_create(slug="acme-skills", defaults={"name": "Acme skills"})[0]
    team.members.add(world.acme_user)
    team.maintainers.add(world.acme_user)
    return team


def _acme_evaluation_set(world: World) -> dict:
    """A labelled set of acme's skills team: the outsider belongs to no team that owns it."""
    from registry.models import EvaluationSet

    evaluation_set = EvaluationSet.objects.create(team=_acme_team(world), namespace="acme", name="intents")
    return {"set_id": evaluation_set.pk}


def _acme_teammate_kwargs(world: World) -> dict:
    team = _acme_team(world)
    team.members.add(mate := _acme_member(world))
    return {"team_slug": team.slug, "user_id": mate.pk}


def _acme_agent(world: World) -> Agent:
    return create_agent(tenant=world.acme, name="extra-bot", role="support")[0]


ROUTES: list[Route] = [
    # console
    Route("console:member_list", lambda w: {"tenant_slug": w.acme.slug}),
    Route("console:invitation_create", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route(
        "console:invitation_revoke",
        lambda w: {"tenant_slug": w.acme.slug, "invitation_id": _acme_invitation(w)[0].pk},
        "post",
    ),
    # the invitee's side: an invitation to acme addressed to acme_user; a globex user holding its id or token gets 404
    Route("console:invitation_accept", lambda w: {"invitation_id": _acme_invitation(w)[0].pk}, "post"),
    Route("console:invitation_decline", lambda w: {"invitation_id": _acme_invitation(w)[0].pk}, "post"),
    Route("console:invitation_open", lambda w: {"token": _acme_invitation(w)[1]}),
    Route("console:member_edit", lambda w: {"tenant_slug": w.acme.slug, "user_id": _acme_member(w).pk}),
    Route("console:member_edit", lambda w: {"tenant_slug": w.acme.slug, "user_id": _acme_member(w).pk}, "post"),
    Route("console:agent_list", lambda w: {"tenant_slug": w.acme.slug}),
    Route("console:agent_create", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("console:agent_revoke", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}, "post"),
    Route("console:agent_keys", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}),
    Route("console:agent_rotate", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}, "post"),
    Route("console:agent_cut_off", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}, "post"),
    Route("console:agent_suspend", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}, "post"),
    Route("console:agent_resume", lambda w: {"tenant_slug": w.acme.slug, "agent_id": _acme_agent(w).pk}, "post"),
    Route("console:tenant_controls", lambda w: {"tenant_slug": w.acme.slug}),
    Route("console:tenant_freeze", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("console:tenant_unfreeze", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route(
        "console:token_revoke", lambda w: {"token_id": create_personal_token(user=w.acme_user, name="t")[0].pk}, "post"
    ),
    Route("console:member_remove", lambda w: {"tenant_slug": w.acme.slug, "user_id": _acme_member(w).pk}, "post"),
    # teams belong to no tenant: a team acme_user maintains is as hidden from the globex user as acme's rows
    Route("console:team_detail", lambda w: {"team_slug": _acme_team(w).slug}),
    Route("console:team_member_add", lambda w: {"team_slug": _acme_team(w).slug}, "post"),
    Route("console:team_member_remove", lambda w: _acme_teammate_kwargs(w), "post"),
    Route("console:team_maintainer", lambda w: _acme_teammate_kwargs(w), "post"),
    # registry: owners' evaluation sets belong to the owning team (tests/registry/test_owner_evaluations.py)
    Route("registry:evaluation", _acme_evaluation_set),
    Route("registry:evaluation_run", _acme_evaluation_set, "post"),
    Route("registry:evaluation_add_search", _acme_evaluation_set, "post"),
    Route("registry_api:evaluation-detail", _acme_evaluation_set),
    Route("registry_api:evaluation-run", _acme_evaluation_set, "post"),
    # runs and policies (the gate)
    Route("runs:run_detail", lambda w: {"run_id": _gate_factories().run_for(w.acme_agent).pk}),
    Route("runs_api:run_detail", lambda w: {"run_id": _gate_factories().run_for(w.acme_agent).pk}, client="agent"),
    Route("runs_api:run_calls", lambda w: {"run_id": _gate_factories().run_for(w.acme_agent).pk}, "post", "agent"),
    Route("runs_api:run_finish", lambda w: {"run_id": _gate_factories().run_for(w.acme_agent).pk}, "post", "agent"),
    Route("policies:grant_list", lambda w: {"tenant_slug": w.acme.slug}),
    Route("policies:grant_create", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route(
        "policies:grant_revoke",
        lambda w: {"tenant_slug": w.acme.slug, "grant_id": _gate_factories().grant(w.acme, "docs.*").pk},
        "post",
    ),
    Route("policies_api:tenant_grants", lambda w: {"tenant_slug": w.acme.slug}),
    Route("policies_api:tenant_grants", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("policies_api:grant_revoke", lambda w: {"grant_id": _gate_factories().grant(w.acme, "docs.*").pk}, "post"),
    # local decisions (policies/bundles.py): the tenant admin's opt-in, page and API
    Route("policies:local_decisions_save", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("policies_api:tenant_local_decisions", lambda w: {"tenant_slug": w.acme.slug}),
    Route("policies_api:tenant_local_decisions", lambda w: {"tenant_slug": w.acme.slug}, "put"),
    Route("policies:policy_detail", lambda w: {"policy_id": _gate_factories().tenant_policy(w.acme).pk}),
    *[
        Route(f"policies:{name}", lambda w: {"policy_id": _gate_factories().tenant_policy(w.acme).pk}, "post")
        for name in ("draft_save", "simulate", "publish", "test_add")
    ],
    Route("policies:rollback", lambda w: _acme_policy_version(w), "post"),
    # traces
    Route("traces:detail", lambda w: _traces().trace_kwargs(w)),
    Route("traces:span", lambda w: _traces().span_kwargs(w)),
    Route("traces:why", lambda w: _traces().why_kwargs(w)),
    Route("traces:for_run", lambda w: _traces().run_kwargs(w)),
    Route("traces:settings", lambda w: {"tenant_slug": w.acme.slug}),
    Route("traces:settings", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    # approvals
    Route("approvals:detail", lambda w: _approvals().approval_kwargs(w)),
    Route("approvals:card", lambda w: _approvals().approval_kwargs(w)),
    Route("approvals:decide", lambda w: _approvals().approval_kwargs(w), "post"),
    Route("approvals:notification_settings", lambda w: {"tenant_slug": w.acme.slug}),
    Route("approvals:notification_settings", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("approvals:save_preference", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("approvals_api:approval_detail", lambda w: _approvals().approval_kwargs(w)),
    Route("approvals_api:approval_decision", lambda w: _approvals().approval_kwargs(w), "post"),
    Route("runs_api:run_events", lambda w: _approvals().run_kwargs(w), client="agent"),
    Route("runs_api:client_result", lambda w: _sdk().client_result_kwargs(w), "post", "agent"),
    # reliability (execution plane)
    Route("reliability:reconciliation_detail", lambda w: _reliability().item_kwargs(w)),
    Route("reliability:reconciliation_resolve", lambda w: _reliability().item_kwargs(w), "post"),
    Route("reliability:credential_list", lambda w: {"tenant_slug": w.acme.slug}),
    Route("reliability:credential_list", lambda w: {"tenant_slug": w.acme.slug}, "post"),
    Route("reliability:credential_delete", lambda w: _reliability().credential_kwargs(w), "post"),
    Route("reliability:credential_bind", lambda w: _reliability().credential_kwargs(w), "post"),
    Route("reliability:credential_unbind", lambda w: _reliability().binding_kwargs(w), "post"),
    Route("reliability_api:pipeline_submit", lambda w: _reliability().run_kwargs(w), "post", "agent"),
    Route("reliability_api:pipeline_detail", lambda w: _reliability().pipeline_kwargs(w), client="agent"),
]


def _reliability():
    from tests.reliability import isolation

    return isolation


def _sdk():
    from tests.sdk import isolation

    return isolation


def _approvals():
    from tests.approvals import isolation

    return isolation


@pytest.fixture
def world(acme, globex) -> World:
    user = get_user_model().objects.create_user("acme-everything", password="pw")
    for role in Role:
        Membership.objects.create(tenant=acme, user=user, role=role)
    agent, key = create_agent(tenant=acme, name="acme-bot", role="support")
    return World(acme=acme, globex=globex, acme_user=user, acme_agent=agent, acme_agent_key=key)


def _request(route: Route, url: str, client) -> Any:
    call = getattr(client, route.method)
    if route.method == "get":
        return call(url)
    if route.client == "agent":
        return call(url, {}, format="json")
    return call(url, {})


def _outsider_client(route: Route, outsider, outsider_agent_client):
    if route.client == "agent":
        return outsider_agent_client
    client = Client()
    client.force_login(outsider)
    return client


def _insider_client(route: Route, world: World):
    if route.client == "agent":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.acme_agent_key}")
        return client
    client = Client()
    client.force_login(world.acme_user)
    return client


def _route_id(route: Route) -> str:
    return f"{route.method.upper()} {route.url_name} ({route.client})"


@pytest.mark.parametrize("route", ROUTES, ids=_route_id)
def test_outsiders_get_404(route: Route, world, outsider, outsider_agent_client):
    url = reverse(route.url_name, kwargs=route.build(world))
    response = _request(route, url, _outsider_client(route, outsider, outsider_agent_client))
    assert response.status_code == 404, f"{route.method.upper()} {url} gave {response.status_code} to an outsider"


@pytest.mark.parametrize("route", ROUTES, ids=_route_id)
def test_insiders_reach_the_same_route(route: Route, world):
    url = reverse(route.url_name, kwargs=route.build(world))
    response = _request(route, url, _insider_client(route, world))
    assert response.status_code != 404, f"{route.method.upper()} {url} is 404 even for acme: check the row"


def test_every_console_route_that_takes_an_id_or_slug_is_in_the_table():
    from console.urls import console_patterns

    covered = {route.url_name for route in ROUTES}
    with_arguments = {f"console:{p.name}" for p in console_patterns if p.pattern.converters}
    assert with_arguments <= covered, f"add rows for {sorted(with_arguments - covered)}"
