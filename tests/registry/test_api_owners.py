"""Owners' registry API: create, validate (400 with JSON paths), immutability (409), lifecycle permissions, diff."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from registry.models import Skill, SkillVersion, Snapshot
from tests.conftest import make_user
from tests.registry.factories import manifest

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def published(owner):
    client = _client(owner)
    assert client.post(reverse("registry_api:skills"), {"manifest": manifest()}, format="json").status_code == 201
    url = reverse("registry_api:version-publish", args=["docs.search_documentation", "1.0.0"])
    assert client.post(url).json()["status"] == "active"
    return Skill.objects.get()


def test_manifest_schema_is_served():
    response = APIClient().get(reverse("registry_api:manifest-schema"))
    assert response.json()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_create_refuses_invalid_manifest_with_paths(owner):
    body = manifest(**{"risk__effect": "destructive", "execution__timeout_ms": 999_999})
    response = _client(owner).post(reverse("registry_api:skills"), {"manifest": body}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["class"] == "validation"
    assert [(e["path"], e["code"]) for e in error["errors"]] == [
        ("$.risk.approval", "destructive_needs_approval"),
        ("$.execution.timeout_ms", "timeout_out_of_bounds"),
    ]
    assert Skill.objects.count() == 0


def test_validate_endpoint_returns_errors_and_warnings(owner):
    body = manifest(name="admin.remove_user")
    response = _client(owner).post(reverse("registry_api:skill-validate"), {"manifest": body}, format="json")
    assert response.json()["errors"] == []
    assert "name_hides_reversibility" in [w["code"] for w in response.json()["warnings"]]


def test_published_version_is_immutable_through_the_api(published, owner):
    url = reverse("registry_api:version-detail", args=["docs.search_documentation", "1.0.0"])
    response = _client(owner).put(url, {"manifest": manifest(description="x" * 40)}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "immutable_version"


def test_edit_creates_a_new_draft_and_diff_flags_breaking(published, owner):
    client = _client(owner)
    body = manifest(version="2.0.0")
    body["input_schema"]["required"] = ["query", "product_area"]
    url = reverse("registry_api:version-create", args=["docs.search_documentation"])
    assert client.post(url, {"manifest": body}, format="json").status_code == 201
    diff = client.get(
        reverse("registry_api:skill-diff", args=["docs.search_documentation"]), {"from": "1.0.0", "to": "2.0.0"}
    ).json()
    assert {
        "path": "$.input_schema.properties.product_area",
        "kind": "changed",
        "detail": "field became required",
        "breaking": True,
    } in diff["changes"]


def test_lifecycle_wrong_method_non_owner_and_happy_path(published, owner, viewer, outsider):
    deprecate = reverse("registry_api:skill-deprecate", args=["docs.search_documentation"])
    retire = reverse("registry_api:skill-retire", args=["docs.search_documentation"])
    assert _client(owner).get(deprecate).status_code == 405
    for stranger in (viewer, outsider):
        response = _client(stranger).post(deprecate, {}, format="json")
        assert response.status_code == 403 and response.json()["error"]["class"] == "authorization"
        assert _client(stranger).post(retire).status_code == 403
    before = Snapshot.objects.count()
    assert _client(owner).post(deprecate, {}, format="json").json()["status"] == "deprecated"
    assert _client(owner).post(retire).json()["status"] == "retired"
    assert Snapshot.objects.count() == before + 2
    assert set(SkillVersion.objects.values_list("status", flat=True)) == {"retired"}


def test_publish_needs_ownership_and_review_is_never_by_the_author(published, owner, viewer):
    client = _client(owner)
    body = manifest(version="1.1.0", **{"risk__effect": "write"})
    client.post(
        reverse("registry_api:version-create", args=["docs.search_documentation"]), {"manifest": body}, format="json"
    )
    publish = reverse("registry_api:version-publish", args=["docs.search_documentation", "1.1.0"])
    assert _client(viewer).post(publish).status_code == 403
    assert client.post(publish).json()["status"] == "in_review"
    approve = reverse("registry_api:version-approve", args=["docs.search_documentation", "1.1.0"])
    assert client.post(approve).status_code == 403
    teammate = make_user("teammate")
    published.owner_team.members.add(teammate)
    assert _client(teammate).post(approve).json()["status"] == "active"


def test_unknown_skill_is_404(owner):
    assert _client(owner).get(reverse("registry_api:skill-detail", args=["no.such"])).status_code == 404


def test_agents_cannot_use_owner_endpoints(published, agent_client):
    assert agent_client.post(reverse("registry_api:skills"), {"manifest": manifest()}, format="json").status_code == 403


def test_openapi_schema_documents_registry_routes(client):
    response = client.get(reverse("api-schema"))
    assert response.status_code == 200
    assert b"/api/v1/skills/search" in response.content
