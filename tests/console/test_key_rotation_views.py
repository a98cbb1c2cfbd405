"""The tenant admin's key page: rotate with a grace period, see the new key once, see both keys with their
last use, cut the old one off; nobody else may do any of it. And `manage.py rotate_agent_key`."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Agent, AgentKeyEvent
from console.services import revoke_agent, rotate_agent_key
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _works(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.get(reverse("agent-whoami")).status_code == 200


def _urls(agent: Agent, tenant: str = "acme") -> dict[str, str]:
    return {name: reverse(f"console:agent_{name}", args=[tenant, agent.pk]) for name in ("keys", "rotate", "cut_off")}


def test_an_admin_rotates_sees_the_new_key_once_and_both_keys_listed(client, tenant_admin, agent_and_key):
    agent, old = agent_and_key
    login(client, tenant_admin)
    urls = _urls(agent)
    response = client.post(urls["rotate"], {"grace_hours": "6"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    new = response.context["key"]
    assert new in response.content.decode() and "keeps working until" in response.content.decode()
    agent.refresh_from_db()
    assert agent.key_matches(new) and _works(new) and _works(old)
    assert (agent.previous_key_expires_at - agent.key_created_at).total_seconds() == 6 * 3600

    page = client.get(urls["keys"]).content.decode()
    assert new not in page and old not in page  # shown once: afterwards only the lookups
    assert f"ak_{agent.key_lookup}_" in page and f"ak_{agent.previous_key_lookup}_" in page
    assert "old, in grace" in page and "Cut off now" in page and "Rotated:" in page
    listing = client.get(reverse("console:agent_list", args=["acme"])).content.decode()
    assert "+ old key" in listing and old not in listing and new not in listing


def test_cut_off_now_stops_the_old_key_and_says_so(client, tenant_admin, agent_and_key):
    agent, old = agent_and_key
    agent, new = rotate_agent_key(agent=agent, by=tenant_admin)
    login(client, tenant_admin)
    urls = _urls(agent)
    response = client.post(urls["cut_off"], follow=True)
    assert response.redirect_chain[-1][0] == urls["keys"]
    page = response.content.decode()
    assert "is cut off" in page and "old, stopped" in page and "Cut off now" not in page
    assert not _works(old) and _works(new)
    again = client.post(urls["cut_off"], follow=True).content.decode()
    assert "no old key that still works" in again
    assert AgentKeyEvent.objects.filter(agent=agent, action="cut_off").count() == 1


@pytest.mark.parametrize(
    ("grace", "message"),
    [
        ("", "Say how many hours"),
        ("-1", "greater than or equal to 0"),
        ("721", "less than or equal to 720"),
        ("soon", "Enter a whole number"),
        ("1e9", "Enter a whole number"),
    ],
)
def test_a_bad_grace_period_is_a_clear_400_and_changes_nothing(client, tenant_admin, agent_and_key, grace, message):
    agent, old = agent_and_key
    login(client, tenant_admin)
    response = client.post(_urls(agent)["rotate"], {"grace_hours": grace})
    assert response.status_code == 400 and message in response.content.decode()
    agent.refresh_from_db()
    assert agent.key_matches(old) and agent.previous_key_lookup is None


def test_a_revoked_agent_cannot_be_rotated_from_the_page(client, tenant_admin, agent):
    revoke_agent(agent=agent)
    login(client, tenant_admin)
    response = client.post(_urls(agent)["rotate"], {"grace_hours": "24"})
    assert response.status_code == 400 and "is revoked" in response.content.decode()
    assert not AgentKeyEvent.objects.exists()


def test_the_key_pages_take_only_their_methods(client, tenant_admin, agent):
    login(client, tenant_admin)
    urls = _urls(agent)
    assert client.post(urls["keys"]).status_code == 405
    assert client.get(urls["rotate"]).status_code == 405
    assert client.get(urls["cut_off"]).status_code == 405


def test_a_member_without_the_admin_role_gets_403_and_rotates_nothing(client, approver, viewer, agent_and_key):
    agent, old = agent_and_key
    rotate_agent_key(agent=agent, by=None)
    for user in (approver, viewer):
        login(client, user)
        urls = _urls(agent)
        assert client.get(urls["keys"]).status_code == 403
        assert client.post(urls["rotate"], {"grace_hours": "1"}).status_code == 403
        assert client.post(urls["cut_off"]).status_code == 403
    assert _works(old) and AgentKeyEvent.objects.count() == 1


def test_another_tenants_admin_gets_404_through_either_tenant(client, outsider, agent_and_key):
    agent, old = agent_and_key
    rotate_agent_key(agent=agent, by=None)
    login(client, outsider)
    for tenant in ("acme", "globex"):
        urls = _urls(agent, tenant)
        assert client.get(urls["keys"]).status_code == 404
        assert client.post(urls["rotate"], {"grace_hours": "1"}).status_code == 404
        assert client.post(urls["cut_off"]).status_code == 404
    assert _works(old) and AgentKeyEvent.objects.count() == 1


def test_rotate_enforces_csrf(tenant_admin, agent_and_key):
    agent, old = agent_and_key
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant_admin)
    assert client.post(_urls(agent)["rotate"], {"grace_hours": "1"}).status_code == 403
    agent.refresh_from_db()
    assert agent.key_matches(old) and agent.previous_key_lookup is None


# manage.py rotate_agent_key ---------------------------------------------------------------------------


def _command(*args: str) -> str:
    out = StringIO()
    call_command("rotate_agent_key", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_a_working_new_key_once_and_keeps_the_old_one_for_its_grace(agent_and_key):
    agent, old = agent_and_key
    output = _command("acme", "support-bot", "--grace-hours", "2")
    new = output.strip().splitlines()[-1]
    assert new.startswith("ak_") and new != old and _works(new) and _works(old)
    assert "works until" in output and old not in output
    agent.refresh_from_db()
    assert (agent.previous_key_expires_at - agent.key_created_at).total_seconds() == 2 * 3600
    assert AgentKeyEvent.objects.get(agent=agent).actor_label == "system"

    assert "is cut off" in _command("acme", "support-bot", "--cut-off")
    assert not _works(old) and _works(new)


def test_the_command_refuses_what_it_cannot_do(agent, globex):
    with pytest.raises(CommandError, match="no agent called"):
        _command("globex", "support-bot")  # another tenant's agent by name
    with pytest.raises(CommandError, match="between 0 and 720"):
        _command("acme", "support-bot", "--grace-hours", "1000")
    with pytest.raises(CommandError, match="no old key"):
        _command("acme", "support-bot", "--cut-off")
    revoke_agent(agent=agent)
    with pytest.raises(CommandError, match="revoked"):
        _command("acme", "support-bot")
