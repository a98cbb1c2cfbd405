"""Platform admins create tenants in the console and invite their first admin; nobody else can."""

import pytest
from django.urls import reverse

from console.models import Invitation, MembershipEvent, Tenant
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_platform_admin_creates_a_tenant_and_invites_its_first_admin(
    client, platform_admin, mailoutbox, django_capture_on_commit_callbacks
):
    login(client, platform_admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("console:tenant_list"),
            {"name": "Initech", "slug": "initech", "first_admin": "Peter@Initech.example"},
        )
    assert response.status_code == 302 and response["Location"] == reverse("console:member_list", args=["initech"])
    tenant = Tenant.objects.get(slug="initech")
    invitation = Invitation.objects.get(tenant=tenant)
    assert (invitation.email, invitation.roles, invitation.invited_by) == (
        "peter@initech.example",
        ["admin"],
        platform_admin,
    )
    assert [mail.to for mail in mailoutbox] == [["peter@initech.example"]]
    event = MembershipEvent.objects.get(tenant=tenant)
    assert (event.action, event.actor_label, event.detail) == (
        "created",
        "root",
        {"first_admin": "peter@initech.example"},
    )
    assert "Initech" in client.get(reverse("console:tenant_list")).content.decode()


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("Acme Corp", "Use lowercase letters, digits and hyphens."),
        ("-lead", "Use lowercase letters, digits and hyphens."),
        ("acme", "The slug acme is taken"),
        ("", "This field is required."),
    ],
)
def test_a_bad_or_taken_slug_is_a_clear_400_and_creates_nothing(client, platform_admin, acme, slug, message):
    login(client, platform_admin)
    response = client.post(reverse("console:tenant_list"), {"name": "X", "slug": slug, "first_admin": "x@example.com"})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Tenant.objects.count() == 1 and not Invitation.objects.exists()


def test_a_malformed_first_admin_is_refused(client, platform_admin):
    login(client, platform_admin)
    response = client.post(reverse("console:tenant_list"), {"name": "X", "slug": "x", "first_admin": "not an@address"})
    assert response.status_code == 400 and not Tenant.objects.exists()


def test_nobody_but_a_platform_admin_lists_or_creates_tenants(client, tenant_admin, viewer, outsider, owner):
    url = reverse("console:tenant_list")
    for person in (tenant_admin, viewer, outsider, owner):
        login(client, person)
        assert client.get(url).status_code == 403
        assert client.post(url, {"name": "Evil", "slug": "evil", "first_admin": person.username}).status_code == 403
    assert not Tenant.objects.filter(slug="evil").exists()


def test_anonymous_is_sent_to_login(client):
    response = client.post(reverse("console:tenant_list"), {"name": "Evil", "slug": "evil", "first_admin": "x"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Tenant.objects.exists()


def test_the_invited_first_admin_accepts_and_manages_the_new_tenant(client, platform_admin, viewer):
    login(client, platform_admin)
    client.post(reverse("console:tenant_list"), {"name": "Initech", "slug": "initech", "first_admin": "viewer"})
    login(client, viewer)
    invitation = Invitation.objects.get(tenant__slug="initech")
    client.post(reverse("console:invitation_accept", args=[invitation.pk]))
    assert client.get(reverse("console:member_list", args=["initech"])).status_code == 200
    joined = MembershipEvent.objects.get(tenant__slug="initech", member=viewer)
    assert (joined.action, joined.actor_label, joined.detail) == ("added", "viewer", {"before": [], "after": ["admin"]})
