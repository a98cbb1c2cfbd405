"""Tenant admins manage the memberships of their tenant in the console (adding people: test_invitations.py)."""

import pytest
from django.urls import reverse

from console.models import Membership, Role
from tests.conftest import login

pytestmark = pytest.mark.django_db


def roles_of(user, tenant) -> set[str]:
    return set(Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True))


def test_admin_sees_every_member_once_with_all_their_roles(client, tenant_admin, approver, viewer):
    login(client, tenant_admin)
    response = client.get(reverse("console:member_list", args=["acme"]))
    assert response.status_code == 200
    rows = {row["user"].username: sorted(row["roles"]) for row in response.context["rows"]}
    assert rows == {"admin": ["admin", "viewer"], "approver": ["approver", "viewer"], "viewer": ["viewer"]}


@pytest.mark.parametrize(
    ("name", "method", "extra_args"),
    [
        ("console:member_list", "get", []),
        ("console:invitation_create", "post", []),
        ("console:member_edit", "get", ["user"]),
        ("console:member_edit", "post", ["user"]),
    ],
)
def test_members_pages_refuse_members_without_the_admin_role(client, approver, acme, name, method, extra_args):
    args = ["acme", *(approver.pk for _ in extra_args)]
    login(client, approver)
    response = getattr(client, method)(reverse(name, args=args), {"username": "approver", "roles": ["admin"]})
    assert response.status_code == 403
    assert roles_of(approver, acme) == {"approver", "viewer"}


def test_members_pages_of_another_tenant_are_404(client, outsider, approver):
    login(client, outsider)
    assert client.get(reverse("console:member_list", args=["acme"])).status_code == 404
    response = client.post(
        reverse("console:invitation_create", args=["acme"]), {"address": "outsider", "roles": ["admin"]}
    )
    assert response.status_code == 404
    assert client.post(reverse("console:member_edit", args=["acme", approver.pk]), {"roles": []}).status_code == 404
    assert Membership.objects.filter(user=outsider, tenant__slug="acme").count() == 0


def test_admin_edits_the_roles_of_a_member_who_holds_several(client, tenant_admin, approver, acme):
    login(client, tenant_admin)
    url = reverse("console:member_edit", args=["acme", approver.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert sorted(page.context["form"].initial["roles"]) == ["approver", "viewer"]
    assert client.post(url, {"roles": ["viewer"]}).status_code == 302
    assert roles_of(approver, acme) == {"viewer"}


def test_unticking_every_role_removes_the_member(client, tenant_admin, viewer, acme):
    login(client, tenant_admin)
    client.post(reverse("console:member_edit", args=["acme", viewer.pk]), {"roles": []})
    assert roles_of(viewer, acme) == set()
    assert client.get(reverse("console:member_edit", args=["acme", viewer.pk])).status_code == 404


def test_admin_cannot_remove_their_own_admin_role(client, tenant_admin, acme):
    login(client, tenant_admin)
    response = client.post(reverse("console:member_edit", args=["acme", tenant_admin.pk]), {"roles": ["viewer"]})
    assert response.status_code == 200
    assert "cannot remove your own admin role" in response.content.decode()
    assert Role.ADMIN in roles_of(tenant_admin, acme)


def test_editing_someone_who_is_not_a_member_of_this_tenant_is_404(client, tenant_admin, outsider):
    login(client, tenant_admin)
    assert client.get(reverse("console:member_edit", args=["acme", outsider.pk])).status_code == 404


def test_member_edit_refuses_other_methods(client, tenant_admin, approver):
    login(client, tenant_admin)
    assert client.put(reverse("console:member_edit", args=["acme", approver.pk])).status_code == 405


def test_platform_admin_manages_any_tenant(client, platform_admin, approver, acme):
    login(client, platform_admin)
    assert client.get(reverse("console:member_list", args=["acme"])).status_code == 200
