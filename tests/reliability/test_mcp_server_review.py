"""Teams propose the MCP servers their skills use; a second person approves; only approved servers are used.

Each test is written as the person trying to get around the rule: the proposer approving their own
server, a user outside the team proposing for it or reviewing it, an agent calling an unapproved server.
"""

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.models import Team
from registry.models import SkillVersion
from reliability import services
from reliability.models import McpServer, McpServerStatus
from runs.errors import Unavailable
from runs.plane.mcp_servers import call_tool, connection_for
from tests.conftest import login, make_user
from tests.registry.test_mcp_import import http_server_url  # noqa: F401 - a fixture: a real MCP server
from tests.reliability.conftest import gate, publish, skill

pytestmark = pytest.mark.django_db


@pytest.fixture
def teammate(owner_team):
    user = make_user("teammate")
    owner_team.members.add(user)
    return user


def propose(client, *, name="desk", url="https://mcp.example.com/mcp", team="support-tools", headers=""):
    return client.post(
        reverse("reliability:mcp_server_propose"), {"team": team, "name": name, "url": url, "headers": headers}
    )


def test_a_teammate_proposes_and_another_approves(client, owner, teammate):
    login(client, owner)
    response = propose(client, headers="X-Api-Key: s3cret-value")
    assert response.status_code == 302
    server = McpServer.objects.get(name="desk")
    assert (server.status, server.team.slug, server.proposed_by) == ("proposed", "support-tools", owner)
    assert server.headers() == {"X-Api-Key": "s3cret-value"}
    assert b"s3cret-value" not in client.get(reverse("reliability:mcp_server_list")).content
    login(client, teammate)
    client.post(reverse("reliability:mcp_server_review", args=[server.pk]), {"decision": "approve"})
    server.refresh_from_db()
    assert (server.status, server.reviewed_by) == ("approved", teammate)
    assert connection_for("mcp://desk/lookup", team="support-tools")["url"] == "https://mcp.example.com/mcp"


def test_the_proposer_cannot_approve_their_own_server(client, owner):
    login(client, owner)
    propose(client)
    server = McpServer.objects.get(name="desk")
    page = client.get(reverse("reliability:mcp_server_list")).content.decode()
    assert 'value="approve"' not in page  # not offered ...
    client.post(reverse("reliability:mcp_server_review", args=[server.pk]), {"decision": "approve"})  # ... nor taken
    server.refresh_from_db()
    assert server.status == "proposed" and server.reviewed_by is None
    with pytest.raises(services.McpServerRefused, match="another member"):
        services.approve_mcp_server(server=server, by=owner)


def test_a_user_outside_the_team_cannot_propose_for_it_or_see_or_review_its_servers(client, owner, tenant_admin):
    other_team_member = make_user("stranger")
    Team.objects.create(slug="billing-platform", name="Billing").members.add(other_team_member)
    login(client, other_team_member)
    response = propose(client, name="sneaky")  # names support-tools, which is not among their teams
    assert response.status_code == 400 and not McpServer.objects.filter(name="sneaky").exists()
    login(client, owner)
    propose(client)
    server = McpServer.objects.get(name="desk")
    for person in (other_team_member, tenant_admin):
        login(client, person)
        assert (
            client.post(reverse("reliability:mcp_server_review", args=[server.pk]), {"decision": "approve"}).status_code
            == 404
        )
        assert client.post(reverse("reliability:mcp_server_import", args=[server.pk])).status_code == 404
    assert (
        b"mcp.example.com" not in login(client, other_team_member).get(reverse("reliability:mcp_server_list")).content
    )
    assert client.get(reverse("reliability:mcp_server_list")).status_code == 200
    login(client, tenant_admin)  # in no team and not a platform admin
    assert client.get(reverse("reliability:mcp_server_list")).status_code == 403
    assert propose(client, name="admins").status_code == 403
    server.refresh_from_db()
    assert server.status == "proposed"
    with pytest.raises(PermissionDenied):
        services.propose_mcp_server(team=server.team, name="direct", url="https://x.example/mcp", by=other_team_member)


def test_an_unapproved_or_declined_server_is_never_called(client, owner, teammate):
    login(client, owner)
    propose(client)
    server = McpServer.objects.get(name="desk")
    with pytest.raises(Unavailable) as refused:
        connection_for("mcp://desk/lookup", team="support-tools")
    assert refused.value.code == "server_not_approved"
    services.decline_mcp_server(server=server, by=teammate)
    with pytest.raises(Unavailable):
        connection_for("mcp://desk/lookup", team="support-tools")
    with pytest.raises(services.McpServerRefused, match="not waiting for review"):
        services.approve_mcp_server(server=server, by=teammate)  # a decline is final: propose again


def test_an_unapproved_server_cannot_be_imported_from(client, owner, teammate, http_server_url):  # noqa: F811
    login(client, owner)
    assert propose(client, url=http_server_url).status_code == 302
    server = McpServer.objects.get(name="desk")
    response = client.post(reverse("reliability:mcp_server_import", args=[server.pk]), follow=True)
    assert "only an approved server is imported" in response.content.decode()
    assert not SkillVersion.objects.filter(skill__namespace="mcp.desk").exists()
    services.approve_mcp_server(server=server, by=teammate)
    response = client.post(reverse("reliability:mcp_server_import", args=[server.pk]))
    assert response.status_code == 200 and "mcp.desk.delete_ticket" in response.content.decode()
    assert SkillVersion.objects.filter(skill__namespace="mcp.desk", defaults_confirmed=False).count() == 3


def test_the_url_must_pass_the_egress_rules(client, owner, settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    login(client, owner)
    response = propose(client, url="http://127.0.0.1:9/mcp")
    assert response.status_code == 400 and "The URL is refused" in response.content.decode()
    response = propose(client, name="ftp", url="ftp://mcp.example.com/mcp")
    assert response.status_code == 400 and "only http and https" in response.content.decode()
    assert not McpServer.objects.exists()


def test_a_taken_name_or_malformed_input_is_a_clear_400(client, owner, teammate):
    login(client, owner)
    propose(client)
    assert "already exists" in propose(client).content.decode()
    assert propose(client, name="Bad Name!").status_code == 400
    assert propose(client, name="x2", headers="no colon here").status_code == 400
    assert McpServer.objects.count() == 1
    login(client, teammate)
    server = McpServer.objects.get()
    assert (
        client.post(reverse("reliability:mcp_server_review", args=[server.pk]), {"decision": "maybe"}).status_code
        == 400
    )
    server.refresh_from_db()
    assert server.status == "proposed"


def test_a_platform_admin_registers_directly_and_reviews_any_proposal(client, platform_admin, owner):
    login(client, owner)
    propose(client)
    login(client, platform_admin)
    client.post(reverse("reliability:mcp_server_review", args=[McpServer.objects.get().pk]), {"decision": "approve"})
    assert McpServer.objects.get().status == McpServerStatus.APPROVED
    response = client.post(
        reverse("reliability:mcp_server_list"), {"name": "ops", "transport": "http", "url": "https://ops.example/mcp"}
    )
    assert response.status_code == 302 and McpServer.objects.get(name="ops").status == "approved"
    login(client, owner)  # a team member cannot use the platform admin's direct registration
    response = client.post(
        reverse("reliability:mcp_server_list"), {"name": "own", "transport": "http", "url": "https://own.example/mcp"}
    )
    assert response.status_code == 403 and not McpServer.objects.filter(name="own").exists()


def test_the_servers_page_costs_the_same_queries_with_more_servers(client, owner, teammate):
    login(client, owner)
    url = reverse("reliability:mcp_server_list")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured.captured_queries)

    propose(client, name="first")
    one = queries()
    for n in range(6):
        propose(client, name=f"more-{n}", url=f"https://more-{n}.example/mcp")
    assert 0 < queries() <= one


def test_an_agents_call_reaches_a_proposed_server_only_once_another_person_approves_it(
    world, mcp_url, owner, owner_team, teammate
):
    """The real gate, a real MCP server counting its executions: nothing arrives while the server waits.
    The server is shared by the module's tests, so its count is read before and after, through a second
    entry an operator registered for the same URL."""
    McpServer.objects.create(name="desk-counter", url=mcp_url, status=McpServerStatus.APPROVED, team=owner_team)

    def lookups() -> int:
        counter = connection_for("mcp://desk-counter/counts", team="support-tools")
        return call_tool(counter, "counts", {}, timeout_s=10)["executions"].get("lookup", 0)

    before = lookups()
    server = services.propose_mcp_server(team=owner.teams.get(), name="desk", url=mcp_url, by=owner)
    skill("desk.lookup", "mcp://desk/lookup")
    publish()
    run, results = gate(world["agent"], [{"call_id": "c1", "name": "desk.lookup", "arguments": {"item_id": "i-1"}}])
    assert results[0]["status"] == "error" and results[0]["error"]["code"] == "server_not_approved"
    assert lookups() == before  # the refused call never reached the server
    services.approve_mcp_server(server=server, by=teammate)
    _, results = gate(
        world["agent"], [{"call_id": "c2", "name": "desk.lookup", "arguments": {"item_id": "i-1"}}], run=run
    )
    assert results[0]["status"] == "ok" and results[0]["content"]["name"] == "Item i-1"
    assert lookups() == before + 1
