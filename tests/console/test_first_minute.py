"""The first minute: an approver's home leads to the inbox; admins find Grants, platform admins MCP servers."""

import pytest
from django.urls import reverse

from tests.conftest import login
from tests.runs.test_links import run_needing_approval

pytestmark = pytest.mark.django_db


def test_approver_home_calls_to_the_inbox_with_the_pending_count(client, approver, agent_client, acme):
    run_needing_approval(agent_client, acme)
    login(client, approver)
    html = client.get(reverse("console:home")).content.decode()
    assert 'id="inbox-cta"' in html
    assert "1 request waits for your decision" in html
    assert f'href="{reverse("approvals:inbox")}">Open the inbox' in html


def test_approver_home_counts_in_plural_and_says_when_nothing_waits(client, approver, agent_client, acme):
    login(client, approver)
    html = client.get(reverse("console:home")).content.decode()
    assert 'id="inbox-cta"' in html and "Nothing waits for your decision" in html
    run_needing_approval(agent_client, acme)
    from tests.runs.conftest import call, post_calls, start_run

    second = start_run(agent_client)
    post_calls(
        agent_client,
        second["run_id"],
        [call("c1", "support.send_email", {"to": "b@example.org", "subject": "s", "body_text": "t"})],
    )
    assert "2 requests wait for your decision" in client.get(reverse("console:home")).content.decode()


def test_viewer_home_has_no_inbox_call_to_action(client, viewer, agent_client, acme):
    run_needing_approval(agent_client, acme)
    login(client, viewer)
    html = client.get(reverse("console:home")).content.decode()
    assert 'id="inbox-cta"' not in html and "wait for your decision" not in html


def test_outsider_home_does_not_count_another_tenants_requests(client, outsider, agent_client, acme):
    run_needing_approval(agent_client, acme)
    login(client, outsider)  # an approver in globex
    html = client.get(reverse("console:home")).content.decode()
    assert "Nothing waits for your decision" in html and "1 request waits" not in html


@pytest.mark.parametrize(
    "page", ["console:member_list", "console:agent_list", "policies:grant_list", "reliability:credential_list"]
)
def test_admin_tabs_include_grants_on_every_admin_page(client, tenant_admin, page):
    login(client, tenant_admin)
    html = client.get(reverse(page, args=["acme"])).content.decode()
    assert 'aria-label="Tenant administration"' in html
    assert f'href="{reverse("policies:grant_list", args=["acme"])}"' in html


def test_grants_page_marks_its_tab_and_the_admin_nav_item(client, tenant_admin):
    login(client, tenant_admin)
    html = client.get(reverse("policies:grant_list", args=["acme"])).content.decode()
    grants_url = reverse("policies:grant_list", args=["acme"])
    assert f'<a href="{grants_url}" class="active">Grants</a>' in html
    assert f'<a href="{reverse("console:member_list", args=["acme"])}" class="active">Admin</a>' in html


def test_non_admins_see_no_grants_tab(client, viewer, approver, outsider):
    grants_url = reverse("policies:grant_list", args=["acme"])
    for user in (viewer, approver):
        login(client, user)
        assert grants_url not in client.get(reverse("console:home")).content.decode()
        assert client.get(reverse("console:member_list", args=["acme"])).status_code == 403
        assert client.get(grants_url).status_code == 403
    login(client, outsider)
    assert client.get(grants_url).status_code == 404


def test_mcp_servers_are_linked_for_platform_admins_and_team_members_only(client, platform_admin, tenant_admin, owner):
    url = reverse("reliability:mcp_server_list")
    for user in (platform_admin, owner):
        login(client, user)
        assert f'href="{url}"' in client.get(reverse("console:home")).content.decode()
        assert client.get(url).status_code == 200
    login(client, tenant_admin)  # in no owning team
    assert url not in client.get(reverse("console:home")).content.decode()
    assert client.get(url).status_code == 403
