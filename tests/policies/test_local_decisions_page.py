"""The grants page's local-decisions form: a tenant admin opts agent roles in and sets how long a bundle holds."""

from datetime import timedelta

import pytest
from django.urls import reverse

from console.services import create_agent
from policies import bundles

pytestmark = pytest.mark.django_db


@pytest.fixture
def roles(acme):
    create_agent(tenant=acme, name="support-bot", role="support")
    create_agent(tenant=acme, name="billing-bot", role="billing")


def test_the_admin_opts_a_role_in_and_sets_the_validity(client, tenant_admin, acme, roles):
    client.force_login(tenant_admin)
    page = client.get(reverse("policies:grant_list", args=[acme.slug]))
    assert page.status_code == 200 and b"Local decisions" in page.content
    url = reverse("policies:local_decisions_save", args=[acme.slug])
    answer = client.post(url, {"agent_roles": ["support"], "bundle_validity_minutes": 5})
    assert answer.status_code == 302
    saved = bundles.settings_of(acme)
    assert saved.agent_roles == ["support"] and saved.bundle_validity == timedelta(minutes=5)
    assert saved.updated_by_label == tenant_admin.username


def test_a_role_no_agent_has_and_a_validity_above_the_ceiling_are_refused(client, tenant_admin, acme, roles, settings):
    settings.AIRLOCK_BUNDLE_MAX_VALIDITY_SECONDS = 600
    client.force_login(tenant_admin)
    url = reverse("policies:local_decisions_save", args=[acme.slug])
    assert client.post(url, {"agent_roles": ["root"], "bundle_validity_minutes": 5}).status_code == 400
    assert client.post(url, {"agent_roles": ["support"], "bundle_validity_minutes": 11}).status_code == 400
    assert bundles.settings_of(acme).agent_roles == []


def test_a_viewer_cannot_opt_in_and_get_is_refused(client, viewer, acme, roles):
    client.force_login(viewer)
    url = reverse("policies:local_decisions_save", args=[acme.slug])
    assert client.post(url, {"agent_roles": ["support"], "bundle_validity_minutes": 5}).status_code in (403, 404)
    assert client.get(url).status_code == 405
    assert bundles.settings_of(acme).agent_roles == []
