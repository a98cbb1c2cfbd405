"""The grant form picks from what exists: another tenant's roles and skills are never offered, a typo is a field
error and no grant, and the live preview (admins only) shows what a grant covers and warns of destructive skills."""

import pytest
from django.urls import reverse

from console.services import create_agent, revoke_agent
from policies.models import Grant
from tests.conftest import login
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db


@pytest.fixture
def catalog(acme, globex, agent):
    """acme has a `support` agent, globex a `ledger` one; skills offered to one tenant, to both, to another role."""
    create_agent(tenant=globex, name="globex-bot", role="ledger")
    make_skill("billing.create_refund", tenants=["acme"], effect="write")
    make_skill("billing.delete_invoice", tenants=["acme"], effect="destructive")
    make_skill("billing.read_invoice")
    make_skill("ops.restart_service", roles=["ops"])
    make_skill("globexonly.secret_ledger", tenants=["globex"], roles=["ledger"], effect="destructive")


def _post(client, tenant_slug: str, **data):
    return client.post(reverse("policies:grant_create", args=[tenant_slug]), data)


def _preview(client, tenant_slug: str, **params):
    return client.get(reverse("policies:grant_preview", args=[tenant_slug]), params)


def test_pickers_offer_the_tenants_roles_and_offered_skills_only(client, catalog, tenant_admin):
    login(client, tenant_admin)
    page = client.get(reverse("policies:grant_list", args=["acme"])).content.decode()
    assert '<option value="support">support</option>' in page
    assert 'value="billing.*"' in page and 'value="billing.delete_invoice"' in page and 'value="ops.*"' in page
    assert "globexonly" not in page and "ledger" not in page


def test_another_tenants_admin_sees_none_of_my_roles_or_skills(client, catalog, outsider):
    login(client, outsider)
    page = client.get(reverse("policies:grant_list", args=["globex"])).content.decode()
    assert '<option value="ledger">ledger</option>' in page and "globexonly.secret_ledger" in page
    assert "billing.create_refund" not in page and "billing.delete_invoice" not in page
    assert '<option value="support">' not in page
    preview = _preview(client, "globex", agent_role="ledger", skill_pattern="billing.*").content.decode()
    assert "billing.read_invoice" in preview and "billing.delete_invoice" not in preview
    assert "billing.create_refund" not in preview
    assert _preview(client, "acme", skill_pattern="billing.*").status_code == 404
    assert client.get(reverse("policies:grant_list", args=["acme"])).status_code == 404


def test_another_tenants_admin_cannot_grant_my_tenants_skill(client, catalog, outsider):
    login(client, outsider)
    response = _post(client, "globex", agent_role="ledger", skill_pattern="billing.delete_invoice")
    assert response.status_code == 400
    assert "No skill or namespace “billing.delete_invoice” is offered to Globex" in response.content.decode()
    assert _post(client, "acme", agent_role="support", skill_pattern="billing.*").status_code == 404
    assert not Grant.objects.exists()


@pytest.mark.parametrize(
    "data,field,message",
    [
        ({"agent_role": "support", "skill_pattern": "billing.create_refnd"}, "skill_pattern", "No skill or namespace"),
        ({"agent_role": "suport", "skill_pattern": "billing.*"}, "agent_role", "No agent of Acme Corp has the role"),
        ({"agent_role": "support", "skill_pattern": "*"}, "skill_pattern", "No skill or namespace “*”"),
        ({"agent_role": "support", "skill_pattern": "billing.*.x"}, "skill_pattern", "No skill or namespace"),
        ({"agent_role": "ledger", "skill_pattern": "billing.*"}, "agent_role", "No agent of Acme Corp"),
        ({"agent_role": "support", "skill_pattern": "ops.*"}, "skill_pattern", "is not offered to support agents"),
        ({"agent_role": "", "skill_pattern": ""}, "agent_role", "This field is required."),
        ({"agent_role": "support", "skill_pattern": "billing.*", "expires_at": "soon"}, "expires_at", "valid"),
    ],
)
def test_malformed_or_unknown_input_is_a_field_error_and_no_grant(client, catalog, tenant_admin, data, field, message):
    login(client, tenant_admin)
    response = _post(client, "acme", **data)
    assert response.status_code == 400
    assert message in " ".join(str(error) for error in response.context["form"].errors[field])
    assert message in response.content.decode()
    assert not Grant.objects.exists()


def test_a_revoked_agents_role_is_not_offered(client, catalog, acme, tenant_admin):
    old_bot, _ = create_agent(tenant=acme, name="old-bot", role="retired-role")
    revoke_agent(agent=old_bot)
    login(client, tenant_admin)
    assert b"retired-role" not in client.get(reverse("policies:grant_list", args=["acme"])).content
    assert _post(client, "acme", agent_role="retired-role", skill_pattern="billing.*").status_code == 400


def test_a_picked_grant_is_created(client, catalog, tenant_admin):
    login(client, tenant_admin)
    response = _post(client, "acme", agent_role="support", skill_pattern="billing.*", oauth_scopes="b a")
    assert response.status_code == 302
    created = Grant.objects.get()
    assert (created.agent_role, created.skill_pattern, created.oauth_scopes) == ("support", "billing.*", ["a", "b"])


def test_preview_lists_covered_skills_and_warns_of_destructive_ones(client, catalog, tenant_admin):
    login(client, tenant_admin)
    namespace = _preview(client, "acme", agent_role="support", skill_pattern="billing.*").content.decode()
    assert "billing.* covers 3 current skills" in namespace
    assert "billing.create_refund" in namespace and "billing.read_invoice" in namespace
    assert "Destructive:" in namespace and "billing.delete_invoice" in namespace
    one = _preview(client, "acme", agent_role="support", skill_pattern="billing.read_invoice").content.decode()
    assert "covers 1 current skill" in one and "Destructive" not in one
    not_offered = _preview(client, "acme", agent_role="support", skill_pattern="ops.*").content.decode()
    assert "not offered to support agents" in not_offered and "Destructive" not in not_offered
    assert "<html" not in namespace  # the partial, not the page


def test_preview_of_unknown_input_shows_nothing(client, catalog, tenant_admin):
    login(client, tenant_admin)
    for params in ({"skill_pattern": "billing.delete_invoce"}, {"skill_pattern": "*"}, {"agent_role": "x" * 500}, {}):
        body = _preview(client, "acme", **params).content.decode()
        assert "Pick a skill or namespace" in body and "billing." not in body


def test_preview_is_for_admins_only(client, catalog, viewer, outsider):
    login(client, viewer)
    assert _preview(client, "acme", skill_pattern="billing.*").status_code == 403
    client.logout()
    assert _preview(client, "acme", skill_pattern="billing.*").status_code == 302  # to the login page
    login(client, outsider)
    assert _preview(client, "acme", skill_pattern="billing.*").status_code == 404
    assert client.post(reverse("policies:grant_preview", args=["globex"])).status_code == 405


def test_an_existing_grant_that_reaches_nothing_is_flagged(client, catalog, acme, tenant_admin):
    grant(acme, "ops.*")  # ops.restart_service is offered to ops agents only
    grant(acme, "billing.*")
    login(client, tenant_admin)
    page = client.get(reverse("policies:grant_list", args=["acme"])).content.decode()
    assert page.count("covers nothing") == 1
