"""The shell: login, logout, home dashboard and the tenant switcher."""

import pytest
from django.test import Client
from django.urls import reverse

from console.models import Membership, Role
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_login_page_renders_for_anonymous_visitors(client):
    response = client.get(reverse("console:login"))
    assert response.status_code == 200
    assert b'name="username"' in response.content


def test_home_redirects_anonymous_visitors_to_login(client):
    response = client.get(reverse("console:home"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("console:login"))


def test_logging_in_with_a_password_shows_the_shell_and_switcher(approver, globex):
    Membership.objects.create(tenant=globex, user=approver, role=Role.VIEWER)
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("console:login"))
    response = client.post(
        reverse("console:login"),
        {"username": "approver", "password": "pw", "csrfmiddlewaretoken": page.context["csrf_token"]},
        follow=True,
    )
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("console:home")
    html = response.content.decode()
    assert 'id="tenant-switcher"' in html
    assert '<option value="acme" selected>' in html and '<option value="globex"' in html
    assert "Log out" in html


def test_a_wrong_password_is_refused_with_a_message(client, approver):
    response = client.post(reverse("console:login"), {"username": "approver", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_login_without_csrf_token_is_refused(approver):
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("console:login"), {"username": "approver", "password": "pw"})
    assert response.status_code == 403


def test_logout_is_post_only_and_ends_the_session(client, approver):
    login(client, approver)
    assert client.get(reverse("console:logout")).status_code == 405
    response = client.post(reverse("console:logout"))
    assert response.status_code == 302 and response.url == reverse("console:login")
    assert client.get(reverse("console:home")).status_code == 302


def test_home_shows_the_current_tenant_and_dashboard_cards(client, approver):
    login(client, approver)
    response = client.get(reverse("console:home"))
    assert response.status_code == 200
    assert response.context["current_tenant"].slug == "acme"
    assert any(card["label"] == "Tenants" for card in response.context["cards"])
    assert client.post(reverse("console:home")).status_code == 405


def test_home_of_a_user_without_tenants_says_how_to_get_one(client, django_user_model):
    login(client, django_user_model.objects.create_user("nobody", password="pw"))
    response = client.get(reverse("console:home"))
    assert response.status_code == 200
    assert "not a member of any tenant" in response.content.decode()


def test_switching_tenant_changes_the_current_tenant(client, approver, globex):
    Membership.objects.create(tenant=globex, user=approver, role=Role.VIEWER)
    login(client, approver)
    response = client.post(reverse("console:switch_tenant"), {"tenant": "globex", "next": reverse("console:home")})
    assert response.status_code == 302 and response.url == reverse("console:home")
    assert client.get(reverse("console:home")).context["current_tenant"].slug == "globex"


def test_switching_to_a_tenant_of_which_one_is_not_a_member_is_404(client, approver, globex):
    login(client, approver)
    assert client.post(reverse("console:switch_tenant"), {"tenant": "globex"}).status_code == 404
    assert client.get(reverse("console:home")).context["current_tenant"].slug == "acme"


def test_switching_tenant_is_post_only_and_ignores_foreign_next_urls(client, approver):
    login(client, approver)
    assert client.get(reverse("console:switch_tenant")).status_code == 405
    response = client.post(reverse("console:switch_tenant"), {"tenant": "acme", "next": "https://evil.example/"})
    assert response.url == reverse("console:home")


def test_switching_tenant_needs_a_csrf_token(approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert client.post(reverse("console:switch_tenant"), {"tenant": "acme"}).status_code == 403


def test_admin_link_appears_only_for_tenant_admins(client, approver, tenant_admin):
    members_url = reverse("console:member_list", args=["acme"])
    login(client, approver)
    assert members_url not in client.get(reverse("console:home")).content.decode()
    login(client, tenant_admin)
    assert members_url in client.get(reverse("console:home")).content.decode()
