"""Joining a tenant is an invitation the invitee accepts, and admins learn nothing about platform accounts.

Written as the attack: acme's admin tries to list platform users, to tell from the answer whether an
address has an account, and to make someone a member without their consent; an invitee tries to
use an invitation that was declined, expired or revoked; globex's admin tries to see or revoke
acme's invitations.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console import services
from console.models import Invitation, InvitationEvent, Membership
from console.tenancy import tenants_for
from tests.conftest import login, make_user
from tests.console.factories import invitation_with_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def stranger(db):
    """A platform user in no tenant, with the address stranger@example.com."""
    return make_user("stranger")


def invite(client, address: str, roles=("approver",)):
    return client.post(reverse("console:invitation_create", args=["acme"]), {"address": address, "roles": list(roles)})


def roles_of(user, tenant) -> set[str]:
    return set(Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True))


def mailed_link(message) -> str:
    return re.search(re.escape(settings.AIRLOCK_PUBLIC_URL) + r"(/\S+)", message.body).group(1)


# --- the admin's side: no listing, no oracle, no membership without consent ----------------------


def test_an_admin_cannot_list_or_search_platform_users(client, tenant_admin, stranger, outsider):
    login(client, tenant_admin)
    for query in ({}, {"q": "str"}, {"search": "stra"}, {"user": "s"}, {"address": "out"}):
        page = client.get(reverse("console:member_list", args=["acme"]), query).content.decode()
        assert "stranger" not in page and "outsider" not in page
        assert "<datalist" not in page and 'autocomplete="off"' in page
    from console.urls import console_patterns

    assert not [p for p in console_patterns if "user" in str(p.pattern) and "members" not in str(p.pattern)]


@pytest.mark.parametrize(
    ("existing", "missing"), [("stranger", "ghost"), ("stranger@example.com", "ghost@example.com")]
)
def test_the_answer_is_the_same_whether_or_not_an_account_exists(
    client, tenant_admin, stranger, existing, missing, django_capture_on_commit_callbacks
):
    login(client, tenant_admin)
    answers = []
    for address in (existing, missing):
        with django_capture_on_commit_callbacks(execute=True):
            response = invite(client, address)
        assert response.status_code == 302 and response["Location"] == reverse("console:member_list", args=["acme"])
        page = client.get(response["Location"]).content.decode().replace(address, "ADDRESS")
        answers.append(re.search(r'<li class="success">(.*?)</li>', page, re.S).group(1))
    assert answers[0] == answers[1]  # the confirmation reads the same, word for word
    invitations = Invitation.objects.filter(tenant__slug="acme").order_by("pk")
    assert [i.address for i in invitations] == [existing, missing]
    assert Membership.objects.filter(user=stranger).count() == 0
    if "@" in existing:  # both addresses are mailed: the mail log tells the admin nothing either
        assert sorted(m.to[0] for m in mail.outbox) == sorted([existing, missing])
    else:
        assert mail.outbox == []  # a username is never resolved to an address


def test_an_invited_user_is_not_a_member_until_they_accept(client, tenant_admin, stranger, acme):
    login(client, tenant_admin)
    invite(client, "stranger", roles=["approver", "viewer"])
    assert roles_of(stranger, acme) == set() and not tenants_for(stranger).exists()
    page = client.get(reverse("console:member_list", args=["acme"]))
    assert [row["user"].username for row in page.context["rows"]] == ["admin"]  # pending, not a member
    assert [i.address for i in page.context["invitations"]] == ["stranger"]

    login(client, stranger)
    home = client.get(reverse("console:home")).content.decode()
    assert "admin invites you to Acme Corp" in home and "Accept" in home
    invitation = Invitation.objects.get()
    response = client.post(reverse("console:invitation_accept", args=[invitation.pk]))
    assert response.status_code == 302
    assert roles_of(stranger, acme) == {"approver", "viewer"}
    assert "invites you" not in client.get(reverse("console:home")).content.decode()
    log = InvitationEvent.objects.filter(invitation=invitation).order_by("pk").values_list("action", "actor_label")
    assert list(log) == [("invited", "admin"), ("accepted", "stranger")]


def test_the_mailed_link_works_for_the_addressed_account_only(
    client, tenant_admin, stranger, viewer, acme, django_capture_on_commit_callbacks
):
    login(client, tenant_admin)
    with django_capture_on_commit_callbacks(execute=True):
        invite(client, "Stranger@Example.com", roles=["viewer"])
    [message] = mail.outbox
    assert message.to == ["stranger@example.com"] and "Acme Corp" in message.subject
    link = mailed_link(message)
    assert Invitation.objects.get().token_hash not in message.body and link.split("/")[-2] not in str(
        Invitation.objects.values_list().get()
    )  # the token is stored only as a hash

    login(client, viewer)  # someone else holding the link
    assert client.get(link).status_code == 404
    login(client, stranger)
    page = client.get(link)
    assert page.status_code == 200 and "Accept" in page.content.decode()
    client.post(reverse("console:invitation_accept", args=[page.context["invitation"].pk]))
    assert roles_of(stranger, acme) == {"viewer"}
    anonymous = Client().get(link)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("console:login"))


def test_declining_creates_no_membership_and_hides_who_declined(client, tenant_admin, stranger, acme):
    invitation, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    login(client, stranger)
    assert client.post(reverse("console:invitation_decline", args=[invitation.pk])).status_code == 302
    assert roles_of(stranger, acme) == set()
    login(client, tenant_admin)
    log = client.get(reverse("console:member_list", args=["acme"])).content.decode()
    assert "declined" in log and "the invitee" in log


@pytest.mark.parametrize("ending", ["declined", "expired", "revoked", "accepted"])
def test_a_closed_invitation_cannot_be_accepted(client, tenant_admin, stranger, acme, ending):
    invitation, token = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    if ending == "declined":
        services.decline_invitation(invitation=invitation, user=stranger)
    elif ending == "expired":
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    elif ending == "revoked":
        services.revoke_invitation(invitation=invitation, user=tenant_admin)
    else:
        services.accept_invitation(invitation=invitation, user=stranger)
        Membership.objects.filter(user=stranger).delete()  # removed since: the old invitation must not re-add
    login(client, stranger)
    response = client.post(reverse("console:invitation_accept", args=[invitation.pk]), follow=True)
    assert "no longer" in response.content.decode() or f"is {ending}" in response.content.decode()
    assert roles_of(stranger, acme) == set()
    with pytest.raises(services.InvitationClosed):
        services.accept_invitation(invitation=invitation, user=stranger)
    assert "Accept</button>" not in client.get(reverse("console:invitation_open", args=[token])).content.decode()
    assert "invites you" not in client.get(reverse("console:home")).content.decode()


def test_re_inviting_replaces_the_pending_invitation(tenant_admin, stranger, acme):
    first, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    second, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin, roles=["admin"])
    first.refresh_from_db()
    assert first.status == "revoked" and second.status == "pending"
    assert list(Invitation.objects.pending().addressed_to(stranger)) == [second]
    assert InvitationEvent.objects.filter(invitation=first, action="replaced").exists()


def test_an_invitation_addressed_to_someone_else_is_404(client, tenant_admin, stranger, viewer, acme):
    invitation, token = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    login(client, viewer)
    assert client.post(reverse("console:invitation_accept", args=[invitation.pk])).status_code == 404
    assert client.post(reverse("console:invitation_decline", args=[invitation.pk])).status_code == 404
    assert client.get(reverse("console:invitation_open", args=[token])).status_code == 404
    assert invitation.status == "pending" and "invites you" not in client.get(reverse("console:home")).content.decode()


# --- revoking, and the other tenant's admin --------------------------------------------------------


def test_the_tenants_admin_revokes_and_it_is_audited(client, tenant_admin, stranger, acme):
    invitation, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    login(client, tenant_admin)
    response = client.post(reverse("console:invitation_revoke", args=["acme", invitation.pk]))
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.status == "revoked" and invitation.revoked_by == tenant_admin
    assert InvitationEvent.objects.filter(invitation=invitation, action="revoked", actor=tenant_admin).exists()
    again = client.post(reverse("console:invitation_revoke", args=["acme", invitation.pk]), follow=True)
    assert "already revoked" in again.content.decode()


def test_another_tenants_admin_can_neither_see_nor_revoke_acmes_invitations(client, tenant_admin, outsider, acme):
    invitation, _ = invitation_with_token(tenant=acme, address="someone@example.com", invited_by=tenant_admin)
    login(client, outsider)  # every role in globex
    assert client.get(reverse("console:member_list", args=["acme"])).status_code == 404
    assert client.post(reverse("console:invitation_revoke", args=["acme", invitation.pk])).status_code == 404
    assert client.post(reverse("console:invitation_revoke", args=["globex", invitation.pk])).status_code == 404
    assert (
        client.post(
            reverse("console:invitation_create", args=["acme"]), {"address": "outsider", "roles": ["admin"]}
        ).status_code
        == 404
    )
    globex_page = client.get(reverse("console:member_list", args=["globex"])).content.decode()
    assert "someone@example.com" not in globex_page
    invitation.refresh_from_db()
    assert invitation.status == "pending" and not Invitation.objects.filter(tenant__slug="acme", username="outsider")


def test_a_member_without_the_admin_role_cannot_invite_or_revoke(client, tenant_admin, approver, acme):
    invitation, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    login(client, approver)
    assert invite(client, "friend").status_code == 403
    assert client.post(reverse("console:invitation_revoke", args=["acme", invitation.pk])).status_code == 403
    assert Invitation.objects.count() == 1 and invitation.status == "pending"


# --- forms, methods, CSRF ------------------------------------------------------------------------


def test_an_invitation_needs_a_role_and_a_well_formed_address(client, tenant_admin):
    login(client, tenant_admin)
    assert invite(client, "friend", roles=[]).status_code == 400
    assert invite(client, "not an address!").status_code == 400
    assert invite(client, "bad@@example").status_code == 400
    assert not Invitation.objects.exists()


def test_wrong_methods(client, tenant_admin, stranger, acme):
    invitation, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    login(client, tenant_admin)
    assert client.get(reverse("console:invitation_create", args=["acme"])).status_code == 405
    assert client.get(reverse("console:invitation_revoke", args=["acme", invitation.pk])).status_code == 405
    login(client, stranger)
    assert client.get(reverse("console:invitation_accept", args=[invitation.pk])).status_code == 405
    assert client.get(reverse("console:invitation_decline", args=[invitation.pk])).status_code == 405


def test_inviting_and_accepting_enforce_csrf(tenant_admin, stranger, acme):
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(tenant_admin)
    assert (
        admin.post(
            reverse("console:invitation_create", args=["acme"]), {"address": "stranger", "roles": ["viewer"]}
        ).status_code
        == 403
    )
    invitation, _ = invitation_with_token(tenant=acme, address="stranger", invited_by=tenant_admin)
    invitee = Client(enforce_csrf_checks=True)
    invitee.force_login(stranger)
    assert invitee.post(reverse("console:invitation_accept", args=[invitation.pk])).status_code == 403
    assert roles_of(stranger, acme) == set()


def test_seed_demo_still_creates_its_memberships_directly(db):
    from airlock.demo import seed_all

    context = seed_all()
    assert roles_of(context.users["adam"], context.tenants["acme"]) == {"admin", "viewer"}
    assert not Invitation.objects.exists()


def test_the_members_page_query_count_does_not_grow_with_invitations(
    client, tenant_admin, acme, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    login(client, tenant_admin)
    url = reverse("console:member_list", args=["acme"])
    invitation_with_token(tenant=acme, address="first", invited_by=tenant_admin)
    with CaptureQueriesContext(connection) as baseline:
        client.get(url)
    for index in range(10):
        invitation_with_token(tenant=acme, address=f"person{index}@example.com", invited_by=tenant_admin)
    with django_assert_max_num_queries(len(baseline.captured_queries)):
        assert client.get(url).status_code == 200
