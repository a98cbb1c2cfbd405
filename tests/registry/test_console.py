"""The owners' console: catalog filters, skill page, live validation, lifecycle actions and who may use them."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from airlock.demo import seed_all
from registry.models import DiscoveryQuery, Skill, SkillVersion
from tests.conftest import login
from tests.registry.factories import manifest

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    return seed_all()


@pytest.fixture
def olivia(demo):
    return demo.users["olivia"]  # member of support-tools, billing-platform and developer-platform


@pytest.fixture
def alice(demo):
    return demo.users["alice"]  # an approver of acme, in no owning team


def test_catalog_lists_and_filters(client, alice):
    login(client, alice)
    response = client.get(reverse("registry:catalog"))
    assert response.status_code == 200
    assert b"admin.delete_user_permanently" in response.content
    filtered = client.get(reverse("registry:catalog"), {"effect": "destructive"}).content.decode()
    assert "admin.delete_user_permanently" in filtered and "docs.search_documentation" not in filtered
    by_namespace = client.get(reverse("registry:catalog"), {"namespace": "customer", "q": "orders"}).content.decode()
    assert "customer.list_orders" in by_namespace and "customer.read_profile" not in by_namespace


def _queries(client, url) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def test_catalog_query_count_does_not_grow_with_skills(client, alice, olivia):
    from registry.services import create_draft_version

    login(client, alice)
    url = reverse("registry:catalog")
    before = _queries(client, url)
    for i in range(15):
        create_draft_version(
            manifest=manifest(f"extra.tool_number_{i}", **{"ownership__team": "support-tools"}), author=olivia
        )
    assert _queries(client, url) == before


def test_skill_page_shows_who_may_use_it_and_misses(client, alice, demo):
    agent = demo.agents["acme/support-bot"]
    DiscoveryQuery.objects.create(query="give money back", namespace="billing", result_count=0, agent=agent)
    login(client, alice)
    body = client.get(reverse("registry:skill", args=["billing.create_refund_request"])).content.decode()
    assert "every tenant" in body and "billing" in body and "give money back" in body
    assert "Deprecate" not in body  # not an owner


def test_live_validation_partial_shows_errors_with_paths(client, olivia):
    login(client, olivia)
    body = manifest(**{"risk__effect": "destructive", "execution__max_attempts": 1})
    response = client.post(reverse("registry:validate"), {"manifest": json.dumps(body)}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "$.risk.approval" in response.content.decode()
    assert "<html" not in response.content.decode()
    bad_json = client.post(reverse("registry:validate"), {"manifest": "{"}, HTTP_HX_REQUEST="true")
    assert "Not valid JSON" in bad_json.content.decode()


def test_new_version_flow_publish_deprecate_retire(client, olivia):
    login(client, olivia)
    skill = Skill.objects.get(name="docs.search_documentation")
    body = dict(skill.versions.get().manifest, version="1.0.1")
    response = client.post(reverse("registry:version_new", args=[skill.name]), {"manifest": json.dumps(body)})
    assert response.status_code == 302
    assert client.post(reverse("registry:publish", args=[skill.name, "1.0.1"])).status_code == 302
    assert skill.versions.get(version="1.0.1").status == "active"
    response = client.post(reverse("registry:deprecate", args=[skill.name]), {"replacement": "customer.read_profile"})
    assert response.status_code == 302
    assert set(skill.versions.values_list("status", flat=True)) == {"deprecated"}
    assert client.post(reverse("registry:retire", args=[skill.name])).status_code == 302
    assert set(skill.versions.values_list("status", flat=True)) == {"retired"}


def test_invalid_new_version_is_shown_inline_with_400(client, olivia):
    login(client, olivia)
    skill = Skill.objects.get(name="docs.search_documentation")
    body = dict(skill.versions.get().manifest, version="1.0.0")
    response = client.post(reverse("registry:version_new", args=[skill.name]), {"manifest": json.dumps(body)})
    assert response.status_code == 400
    assert "version_not_greater" not in response.content.decode()  # codes stay internal; messages are shown
    assert "greater than the latest published 1.0.0" in response.content.decode()


@pytest.mark.parametrize("route", ["deprecate", "retire"])
def test_lifecycle_wrong_method_and_non_owner(client, alice, olivia, route):
    url = reverse(f"registry:{route}", args=["docs.search_documentation"])
    login(client, olivia)
    assert client.get(url).status_code == 405
    login(client, alice)
    assert client.post(url).status_code == 403
    assert SkillVersion.objects.get(skill__name="docs.search_documentation").status == "active"


def test_publish_by_non_owner_is_403_and_unknown_skill_is_404(client, alice, olivia):
    login(client, olivia)
    body = dict(Skill.objects.get(name="orders.get_order").versions.get().manifest, version="1.1.0")
    client.post(reverse("registry:version_new", args=["orders.get_order"]), {"manifest": json.dumps(body)})
    login(client, alice)
    assert client.post(reverse("registry:publish", args=["orders.get_order", "1.1.0"])).status_code == 403
    assert client.post(reverse("registry:publish", args=["no.such", "1.0.0"])).status_code == 404
    assert client.get(reverse("registry:version_new", args=["orders.get_order"])).status_code == 403


def test_diff_page_flags_breaking_changes(client, olivia):
    login(client, olivia)
    skill = Skill.objects.get(name="customer.read_profile")
    body = dict(skill.versions.get().manifest, version="2.0.0")
    body["input_schema"] = dict(body["input_schema"], required=["customer_id", "reason"])
    body["input_schema"]["properties"] = dict(body["input_schema"]["properties"], reason={"type": "string"})
    client.post(reverse("registry:version_new", args=[skill.name]), {"manifest": json.dumps(body)})
    page = client.get(reverse("registry:diff", args=[skill.name]), {"from": "1.0.0", "to": "2.0.0"}).content.decode()
    assert "new required field" in page and "breaking" in page


def test_import_form_refuses_commands_and_everyone_but_platform_admins(client, alice, olivia):
    """Teams import from the servers a second person approved (reliability's MCP servers page), not from any URL."""
    login(client, alice)
    assert client.get(reverse("registry:import_mcp")).status_code == 403
    login(client, olivia)
    assert client.post(reverse("registry:import_mcp"), {"target": "http://x.example/mcp"}).status_code == 403
    login(client, get_user_model().objects.get(username="root"))  # the demo's platform admin
    response = client.post(reverse("registry:import_mcp"), {"target": "rm -rf /", "team": "support-tools"})
    assert response.status_code == 400 and "manage.py import_mcp" in response.content.decode()
