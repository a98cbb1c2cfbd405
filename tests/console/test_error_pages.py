"""The 403, 404 and 500 pages: a 403 names the missing role, the tenant and its admins; a 404 for another
tenant's id reads exactly like one for an id that never existed; the 500 page renders with the database down;
API paths keep JSON bodies."""

import re

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from airlock import errors
from airlock.demo import seed_all
from policies.models import Policy
from tests.conftest import login
from tests.runs.factories import tenant_policy

CSRF_TOKEN = re.compile(rb'(?:value|content)="[A-Za-z0-9]{64}"|"X-CSRFToken": "[A-Za-z0-9]{64}"')


@pytest.fixture
def demo(db):
    return seed_all()


def _body_without(response, path: str) -> bytes:
    return CSRF_TOKEN.sub(b"TOKEN", response.content.replace(path.encode(), b"PATH"))


@pytest.mark.django_db
def test_403_names_the_role_the_tenant_and_its_admins(client, demo):
    login(client, demo.users["olivia"])  # a viewer of acme
    response = client.get(reverse("policies:grant_list", args=["acme"]))
    page = response.content.decode()
    assert response.status_code == 403
    assert "This page needs the admin role in Acme Corp" in page
    assert "adam" in page and "mailto:adam@example.com" in page  # acme's admin
    assert "gina" not in page  # globex's admin
    assert 'class="topbar"' in page and "olivia" in page  # inside the console shell


@pytest.mark.django_db
def test_403_for_a_tenant_policy_olivia_may_not_edit(client, demo):
    policy = tenant_policy(demo.tenants["acme"])
    login(client, demo.users["olivia"])
    response = client.get(reverse("policies:policy_detail", args=[policy.pk]))
    assert response.status_code == 403
    assert b"needs the admin role in Acme Corp" in response.content and b"adam@example.com" in response.content


@pytest.mark.django_db
def test_403_without_a_role_to_name_shows_the_reason(client, demo):
    login(client, demo.users["alice"])  # in no owning team
    response = client.post(reverse("registry:skill_new"), {})
    assert response.status_code == 403
    assert b"Only members of an owning team may create skills." in response.content


@pytest.mark.django_db
def test_404_for_another_tenants_id_is_indistinguishable_from_a_missing_one(client, demo, settings):
    settings.DEBUG = False
    globex_policy = tenant_policy(demo.tenants["globex"])
    missing_id = (Policy.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1000
    login(client, demo.users["adam"])  # admin of acme only
    pairs = [
        (
            reverse("policies:policy_detail", args=[globex_policy.pk]),
            reverse("policies:policy_detail", args=[missing_id]),
        ),
        (reverse("policies:grant_list", args=["globex"]), reverse("policies:grant_list", args=["no-such-tenant"])),
    ]
    for theirs, missing in pairs:
        other_tenant, nothing = client.get(theirs), client.get(missing)
        assert other_tenant.status_code == nothing.status_code == 404
        assert _body_without(other_tenant, theirs) == _body_without(nothing, missing)
        assert b"There is nothing here" in nothing.content and b"No such" not in nothing.content


@pytest.mark.django_db
def test_api_paths_keep_json_errors(client, demo, settings):
    settings.DEBUG = False
    response = client.get("/api/v1/no-such-endpoint/")
    assert response.status_code == 404
    assert response.json() == {"error": {"class": "not_found", "code": "not_found", "message": "Not found."}}
    refused = client.get(reverse("policies_api:tenant_grants", args=["acme"]))
    assert refused.status_code in (401, 403) and refused.json()["error"]["class"] in ("authentication", "authorization")


@pytest.mark.django_db
def test_500_page_with_debug_off(demo, settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = "tests.console.error_urls"
    client = Client(raise_request_exception=False)
    client.force_login(demo.users["adam"])
    page = client.get("/fail/")
    assert page.status_code == 500
    assert b"Airlock hit an internal error" in page.content and b"a bug" not in page.content
    assert b"adam" not in page.content  # rendered without the user
    api = client.get("/api/v1/fail/")
    assert api.status_code == 500 and api.json()["error"]["class"] == "internal"


class Unreachable:
    """A request.user whose every read fails, as a lazy user does while the database is down."""

    def __getattr__(self, name):
        raise AssertionError(f"the 500 page read request.user.{name}")


def test_500_page_touches_neither_the_database_nor_the_user():
    """No django_db mark: pytest-django fails any query made here."""
    request = RequestFactory().get("/runs/")
    request.user = Unreachable()
    request.session = Unreachable()
    response = errors.server_error(request)
    assert response.status_code == 500 and b"Airlock hit an internal error" in response.content
