"""Tenant admins create and revoke agents, and see each new key exactly once."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Agent
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_admin_lists_the_agents_of_the_tenant_only(client, tenant_admin, agent, outsider_agent_client):
    login(client, tenant_admin)
    response = client.get(reverse("console:agent_list", args=["acme"]))
    assert response.status_code == 200
    assert [a.name for a in response.context["agents"]] == ["support-bot"]
    assert "globex-bot" not in response.content.decode()
    assert client.post(reverse("console:agent_list", args=["acme"])).status_code == 405


def test_creating_an_agent_shows_a_working_key_once(client, tenant_admin, acme):
    login(client, tenant_admin)
    response = client.post(reverse("console:agent_create", args=["acme"]), {"name": "triage-bot", "role": "support"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    key = response.context["key"]
    agent = Agent.objects.get(tenant=acme, name="triage-bot")
    assert agent.created_by == tenant_admin and agent.key_matches(key)
    assert key in response.content.decode()
    assert key not in client.get(reverse("console:agent_list", args=["acme"])).content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get(reverse("agent-whoami")).json()["agent"] == "triage-bot"


def test_a_duplicate_or_malformed_agent_name_is_refused(client, tenant_admin, agent):
    login(client, tenant_admin)
    url = reverse("console:agent_create", args=["acme"])
    response = client.post(url, {"name": "support-bot", "role": "support"})
    assert response.status_code == 400
    assert "already has an agent" in response.content.decode()
    assert client.post(url, {"name": "Not A Slug", "role": "support"}).status_code == 400
    assert Agent.objects.count() == 1


def test_agent_create_is_post_only(client, tenant_admin):
    login(client, tenant_admin)
    assert client.get(reverse("console:agent_create", args=["acme"])).status_code == 405


def test_revoking_an_agent_stops_its_key(client, tenant_admin, agent, agent_client):
    login(client, tenant_admin)
    response = client.post(reverse("console:agent_revoke", args=["acme", agent.pk]))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.is_revoked
    assert agent_client.get(reverse("agent-whoami")).json()["error"]["code"] == "revoked_key"
    assert client.get(reverse("console:agent_revoke", args=["acme", agent.pk])).status_code == 405


def test_members_without_admin_role_cannot_touch_agents(client, approver, agent):
    login(client, approver)
    assert client.get(reverse("console:agent_list", args=["acme"])).status_code == 403
    assert client.post(reverse("console:agent_create", args=["acme"]), {"name": "x", "role": "y"}).status_code == 403
    assert client.post(reverse("console:agent_revoke", args=["acme", agent.pk])).status_code == 403
    agent.refresh_from_db()
    assert not agent.is_revoked and Agent.objects.count() == 1


def test_outsiders_get_404_for_agents_of_another_tenant(client, outsider, agent):
    login(client, outsider)
    assert client.get(reverse("console:agent_list", args=["acme"])).status_code == 404
    assert client.post(reverse("console:agent_revoke", args=["acme", agent.pk])).status_code == 404
    # Their own tenant's URL with an acme agent id is 404 as well.
    assert client.post(reverse("console:agent_revoke", args=["globex", agent.pk])).status_code == 404
    agent.refresh_from_db()
    assert not agent.is_revoked


def test_agent_revoke_enforces_csrf(tenant_admin, agent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant_admin)
    assert client.post(reverse("console:agent_revoke", args=["acme", agent.pk])).status_code == 403
    agent.refresh_from_db()
    assert not agent.is_revoked
