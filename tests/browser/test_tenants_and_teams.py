"""Tenants, members, teams and MCP servers in a real browser, each as the person who uses the screen and as
one who must not: a platform admin creates a tenant, a tenant admin removes a member (never the last admin),
a maintainer adds a teammate, a teammate approves another's MCP server proposal (never their own)."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from console.models import Invitation, Membership, Role, Team, Tenant
from reliability.models import McpServer
from tests.browser.conftest import ARTIFACTS
from tests.conftest import make_user

pytestmark = pytest.mark.browser


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_a_platform_admin_creates_a_tenant_from_the_nav(asgi_live_server, login_as, platform_admin, acme):
    page = login_as(platform_admin)
    page.goto(asgi_live_server.url + reverse("console:home"))
    page.locator("nav.nav").get_by_role("link", name="Tenants").click()
    expect(page.locator("h1")).to_have_text("Tenants")
    page.fill("#id_name", "Initech")
    page.fill("#id_slug", "acme")  # taken
    page.fill("#id_first_admin", "peter@initech.example")
    page.get_by_role("button", name="Create and invite").click()
    expect(page.locator("#tenant-form")).to_contain_text("The slug acme is taken")
    page.fill("#id_slug", "initech")
    page.get_by_role("button", name="Create and invite").click()
    expect(page.locator(".messages")).to_contain_text("peter@initech.example is invited as its first admin")
    expect(page.locator("#pending-invitations")).to_contain_text("peter@initech.example")
    assert Invitation.objects.get(tenant__slug="initech").roles == ["admin"]
    page.goto(asgi_live_server.url + reverse("console:tenant_list"))
    _shot(page, "tenants.png")


def test_a_tenant_admin_sees_no_tenants_page(asgi_live_server, login_as, tenant_admin):
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("console:home"))
    expect(page.locator("nav.nav").get_by_role("link", name="Tenants")).to_have_count(0)
    response = page.goto(asgi_live_server.url + reverse("console:tenant_list"))
    assert response.status == 403
    assert not Tenant.objects.filter(slug="initech").exists()


def test_a_tenant_admin_removes_a_member_but_not_the_last_admin(
    asgi_live_server, login_as, tenant_admin, approver, platform_admin, acme
):
    second_admin = make_user("admin2", tenant=acme, roles=[Role.ADMIN])
    page = login_as(second_admin)
    page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"]))
    row = page.locator("tbody tr", has_text="approver").first
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Remove").click()
    expect(page.locator(".messages")).to_contain_text("approver is no longer a member of Acme Corp")
    expect(page.locator("#membership-log")).to_contain_text("approver, viewer → none")
    # admin2 demotes the other admin, then nobody can take admin2's own admin role away
    page.goto(asgi_live_server.url + reverse("console:member_edit", args=["acme", tenant_admin.pk]))
    page.locator("input[value=admin]").uncheck()
    page.get_by_role("button", name="Save roles").click()
    expect(page.locator(".messages")).to_contain_text("Roles of admin updated")
    _shot(page, "members.png")
    page = login_as(platform_admin)  # even a platform admin cannot leave the tenant without an admin
    page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"]))
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("tbody tr", has_text="admin2").get_by_role("button", name="Remove").click()
    expect(page.locator(".messages")).to_contain_text("admin2 is the last admin of Acme Corp")
    assert Membership.objects.filter(tenant=acme, user=second_admin, role=Role.ADMIN).exists()
    assert not Membership.objects.filter(tenant=acme, user=approver).exists()
    assert not Membership.objects.filter(tenant=acme, user=tenant_admin, role=Role.ADMIN).exists()


def test_an_admin_of_another_tenant_and_a_viewer_cannot_manage_members(
    asgi_live_server, login_as, outsider, viewer, tenant_admin
):
    page = login_as(outsider)
    assert page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"])).status == 404
    page = login_as(viewer)
    assert page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"])).status == 403
    expect(page.locator("h1")).to_have_text("This page needs the admin role in Acme Corp")
    expect(page.locator("body")).not_to_contain_text("Membership log")


def test_a_maintainer_adds_a_teammate_and_a_teammate_sees_the_team_read_only(
    asgi_live_server, login_as, owner, owner_team, viewer
):
    owner_team.maintainers.add(owner)
    page = login_as(owner)
    page.goto(asgi_live_server.url + reverse("registry:catalog"))
    page.get_by_role("link", name="Teams").click()
    page.get_by_role("link", name="Open").click()
    expect(page.locator("h1")).to_have_text("Support tools")
    page.fill("#id_username", "viewer")
    page.get_by_role("button", name="Add to team").click()
    expect(page.locator("#teammates")).to_contain_text("viewer")
    expect(page.locator("#team-log")).to_contain_text("added")
    _shot(page, "team.png")

    page = login_as(viewer)  # now a teammate, not a maintainer
    page.goto(asgi_live_server.url + reverse("console:team_detail", args=[owner_team.slug]))
    expect(page.locator(".page-head")).to_contain_text("read-only")
    expect(page.get_by_role("button", name="Remove")).to_have_count(0)
    expect(page.locator("#teammate-form")).to_have_count(0)


def test_someone_outside_the_team_gets_404(asgi_live_server, login_as, outsider, owner_team):
    page = login_as(outsider)
    assert page.goto(asgi_live_server.url + reverse("console:team_detail", args=[owner_team.slug])).status == 404


def test_a_teammate_approves_a_proposed_server_the_proposer_could_not(
    asgi_live_server, login_as, owner, owner_team, viewer
):
    owner_team.members.add(viewer)
    page = login_as(owner)
    page.goto(asgi_live_server.url + reverse("reliability:mcp_server_list"))
    page.fill("#id_name", "desk")
    page.fill("#id_url", "https://mcp.example.com/mcp")
    page.fill("#id_headers", "X-Api-Key: s3cret")
    page.get_by_role("button", name="Propose").click()
    expect(page.locator(".messages")).to_contain_text("another member of support-tools reviews it")
    row = page.locator("#mcp-servers tbody tr", has_text="desk")
    expect(row).to_contain_text("waiting for review")
    expect(row.get_by_role("button", name="Approve")).to_have_count(0)  # not for the proposer
    expect(page.locator("body")).not_to_contain_text("s3cret")

    page = login_as(viewer)
    page.goto(asgi_live_server.url + reverse("reliability:mcp_server_list"))
    row = page.locator("#mcp-servers tbody tr", has_text="desk")
    _shot(page, "mcp-server-review.png")
    row.get_by_role("button", name="Approve").click()
    expect(page.locator(".messages")).to_contain_text("desk is approved")
    expect(row).to_contain_text("approved by viewer")
    assert McpServer.objects.get(name="desk").status == "approved"


def test_a_tenant_admin_outside_every_team_sees_no_servers(asgi_live_server, login_as, tenant_admin, owner):
    page = login_as(tenant_admin)
    assert page.goto(asgi_live_server.url + reverse("reliability:mcp_server_list")).status == 403


def test_a_maintainer_shares_a_server_with_another_team_and_takes_it_back(
    asgi_live_server, login_as, owner, owner_team, viewer
):
    owner_team.members.add(viewer)  # a teammate, not a maintainer: no Share control
    owner_team.maintainers.add(owner)
    Team.objects.create(slug="growth", name="Growth")
    McpServer.objects.create(name="desk", team=owner_team, url="https://mcp.example.com/mcp", status="approved")
    page = login_as(viewer)
    page.goto(asgi_live_server.url + reverse("reliability:mcp_server_list"))
    expect(page.locator("#shares-desk")).to_contain_text("no other team")
    expect(page.locator("#shares-desk").get_by_role("button", name="Share")).to_have_count(0)

    page = login_as(owner)
    page.goto(asgi_live_server.url + reverse("reliability:mcp_server_list"))
    page.get_by_label("Share desk with team").fill("growth")
    page.locator("#shares-desk").get_by_role("button", name="Share").click()
    expect(page.locator(".messages")).to_contain_text("Skills of growth may now call desk")
    expect(page.locator("#shares-desk")).to_contain_text("growth")
    _shot(page, "mcp-server-shared.png")
    page.get_by_role("button", name="Stop sharing desk with growth").click()
    expect(page.locator(".messages")).to_contain_text("Skills of growth may no longer call desk")
    expect(page.locator("#shares-desk")).to_contain_text("no other team")
    assert not McpServer.objects.get(name="desk").shared_with.exists()
