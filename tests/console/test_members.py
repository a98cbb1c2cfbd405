"""Tenant admins manage the memberships of their tenant in the console (adding people: test_invitations.py)."""

import pytest
from django.urls import reverse

from console import services
from console.models import Membership, MembershipEvent, Role
from tests.conftest import login, make_user

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


# --- removing members, the last admin, the membership log ------------------------------------------


def test_admin_removes_a_member_and_the_log_says_who_did_it(client, tenant_admin, approver, acme):
    login(client, tenant_admin)
    response = client.post(reverse("console:member_remove", args=["acme", approver.pk]))
    assert response.status_code == 302
    assert roles_of(approver, acme) == set()
    event = MembershipEvent.objects.get(tenant=acme, member=approver)
    assert (event.action, event.actor_label) == ("removed", "admin")
    assert event.detail == {"before": ["approver", "viewer"], "after": []}
    page = client.get(reverse("console:member_list", args=["acme"])).content.decode()
    assert 'id="membership-log"' in page and "approver, viewer → none" in page


def test_role_changes_are_logged_with_before_and_after(client, tenant_admin, viewer, acme):
    login(client, tenant_admin)
    client.post(reverse("console:member_edit", args=["acme", viewer.pk]), {"roles": ["viewer", "approver"]})
    event = MembershipEvent.objects.get(tenant=acme, member=viewer)
    assert event.action == "roles_changed" and event.detail == {"before": ["viewer"], "after": ["approver", "viewer"]}
    client.post(reverse("console:member_edit", args=["acme", viewer.pk]), {"roles": ["viewer", "approver"]})
    assert MembershipEvent.objects.filter(tenant=acme).count() == 1  # nothing changed, nothing logged


def test_the_last_admin_cannot_be_removed_by_a_platform_admin_either(client, platform_admin, tenant_admin, acme):
    login(client, platform_admin)
    response = client.post(reverse("console:member_remove", args=["acme", tenant_admin.pk]))
    assert response.status_code == 302
    assert Role.ADMIN in roles_of(tenant_admin, acme)
    follow = client.get(response["Location"]).content.decode()
    assert "last admin of Acme Corp" in follow
    response = client.post(reverse("console:member_edit", args=["acme", tenant_admin.pk]), {"roles": ["viewer"]})
    assert response.status_code == 400 and "last admin of Acme Corp" in response.content.decode()
    assert Role.ADMIN in roles_of(tenant_admin, acme)
    assert not MembershipEvent.objects.filter(tenant=acme).exists()


def test_with_a_second_admin_an_admin_can_be_demoted(client, tenant_admin, approver, acme):
    Membership.objects.create(tenant=acme, user=approver, role=Role.ADMIN)
    login(client, approver)
    client.post(reverse("console:member_edit", args=["acme", tenant_admin.pk]), {"roles": ["viewer"]})
    assert roles_of(tenant_admin, acme) == {"viewer"}
    # now approver is the last admin: tenant_admin, no longer admin, cannot act; the service refuses anyway
    with pytest.raises(services.MembershipRefused):
        services.remove_member(tenant=acme, user=approver, by=tenant_admin)


def test_an_admin_cannot_remove_themselves(client, tenant_admin, approver, acme):
    Membership.objects.create(tenant=acme, user=approver, role=Role.ADMIN)
    login(client, tenant_admin)
    client.post(reverse("console:member_remove", args=["acme", tenant_admin.pk]))
    assert Role.ADMIN in roles_of(tenant_admin, acme)


def test_member_remove_refuses_viewers_outsiders_and_get(client, approver, viewer, outsider, acme):
    url = reverse("console:member_remove", args=["acme", viewer.pk])
    login(client, approver)
    assert client.post(url).status_code == 403
    login(client, outsider)  # admin of globex
    assert client.post(url).status_code == 404
    login(client, viewer)
    assert client.get(url).status_code == 405
    assert roles_of(viewer, acme) == {"viewer"}


def test_an_admin_of_another_tenant_cannot_remove_through_their_own_tenant(client, outsider, approver, globex):
    """The outsider names their own tenant and acme's member: not a member there, so 404."""
    login(client, outsider)
    assert client.post(reverse("console:member_remove", args=["globex", approver.pk])).status_code == 404
    assert Membership.objects.filter(user=approver).count() == 2


def test_the_members_page_links_to_approver_groups(client, tenant_admin):
    login(client, tenant_admin)
    page = client.get(reverse("console:member_list", args=["acme"])).content.decode()
    assert f'href="{reverse("approvals:routing", args=["acme"])}"' in page


def test_the_members_page_costs_the_same_queries_with_a_longer_log(
    client, tenant_admin, viewer, acme, django_assert_max_num_queries
):
    login(client, tenant_admin)
    url = reverse("console:member_list", args=["acme"])
    with django_assert_max_num_queries(25) as few:
        client.get(url)
    for n in range(6):
        user = make_user(f"member{n}", tenant=acme, roles=[Role.VIEWER])
        services.set_member_roles(tenant=acme, user=user, roles={"viewer", "approver"}, by=tenant_admin)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(url).status_code == 200
