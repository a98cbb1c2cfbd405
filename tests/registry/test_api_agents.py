"""Agent-facing registry API: filtered signed snapshot with ETag, permission-first search, tool definitions."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.services import create_agent
from registry import discovery
from registry.models import DiscoveryQuery
from registry.services import create_draft_version, deprecate_skill, publish_as_operator
from registry.snapshots import verify_snapshot
from tests.registry.factories import manifest

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _registry_permissions_only(monkeypatch):
    """These tests cover the manifest's own permissions; grants (policies app) are tested there."""
    monkeypatch.setattr(discovery, "DISCOVERY_FILTERS", [])


def _publish(user, name, **overrides):
    """Discovery's catalog, published as an operator would: these skills share one demo function, which
    would otherwise send each after the first to review (tests/security/test_namespace_ownership.py)."""
    body = manifest(name, **overrides)
    return publish_as_operator(version=create_draft_version(manifest=body, author=user), command="test")


@pytest.fixture
def catalog(owner, globex):
    _publish(owner, "docs.search_documentation")
    _publish(
        owner,
        "billing.create_refund_request",
        description=(
            "Create a refund request for a paid order. Use when a customer is owed money. Creates a request; "
            "empty never."
        ),
        **{"permissions__allowed_agent_roles": ["support"]},
    )
    _publish(
        owner,
        "admin.secret_payroll_export",
        description=("Export the payroll ledger for auditors. Use for audits only. Read-only, returns rows or empty."),
        **{"permissions__allowed_tenants": ["globex"]},
    )
    _publish(
        owner,
        "billing.void_invoice_permanently",
        description=("Void an invoice for finance staff. Use for wrong invoices. Changes the invoice; empty never."),
        **{"permissions__allowed_agent_roles": ["finance"]},
    )
    old = _publish(owner, "docs.legacy_search")
    deprecate_skill(skill=old.skill, user=owner)


def _names(response):
    return sorted(item["name"] for item in response.json()["results"])


def test_snapshot_latest_is_filtered_signed_and_etagged(catalog, agent_client):
    url = reverse("registry_api:snapshot-latest")
    response = agent_client.get(url)
    assert response.status_code == 200
    data = response.json()
    assert [s["name"] for s in data["snapshot"]["skills"]] == [
        "billing.create_refund_request",
        "docs.search_documentation",
    ]
    key = APIClient().get(reverse("registry_api:snapshot-public-key")).json()["public_key_pem"]
    assert verify_snapshot(data["snapshot"], data["signature"], key)
    data["snapshot"]["skills"].append({"name": "admin.secret_payroll_export"})
    assert not verify_snapshot(data["snapshot"], data["signature"], key)
    etag = response["ETag"]
    not_modified = agent_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert not_modified.status_code == 304 and not_modified.content == b""
    assert agent_client.get(url, HTTP_IF_NONE_MATCH='"0-stale"').status_code == 200


def test_etag_changes_when_a_new_snapshot_changes_what_the_agent_sees(catalog, owner, agent_client):
    url = reverse("registry_api:snapshot-latest")
    etag = agent_client.get(url)["ETag"]
    _publish(owner, "customer.read_profile")
    response = agent_client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200 and response["ETag"] != etag


def test_the_signed_snapshot_names_the_agent_that_fetched_it(catalog, agent, agent_client, outsider_agent_client):
    mine = agent_client.get(reverse("registry_api:snapshot-latest")).json()["snapshot"]["audience"]
    assert mine == {
        "tenant": "acme",
        "agent_id": agent.pk,
        "agent_name": "support-bot",
        "key_lookup": agent.key_lookup,
        "agent_role": "support",
    }
    theirs = outsider_agent_client.get(reverse("registry_api:snapshot-latest")).json()
    assert theirs["snapshot"]["audience"]["tenant"] == "globex"
    assert theirs["snapshot"]["audience"]["key_lookup"] != agent.key_lookup


def test_snapshot_needs_an_agent_key(catalog, client, owner):
    assert APIClient().get(reverse("registry_api:snapshot-latest")).status_code == 401
    client.force_login(owner)
    assert client.get(reverse("registry_api:snapshot-latest")).status_code == 403


@pytest.mark.parametrize("query", ["payroll export", "void invoice", "legacy search", "admin", "finance"])
def test_search_never_reveals_an_unpermitted_or_deprecated_skill(catalog, agent_client, query):
    response = agent_client.get(reverse("registry_api:skill-search"), {"q": query})
    assert response.status_code == 200
    body = response.content.decode()
    for hidden in ("secret_payroll_export", "void_invoice_permanently", "legacy_search"):
        assert hidden not in body


def test_other_tenant_agent_sees_its_own_skills(catalog, outsider_agent_client):
    response = outsider_agent_client.get(reverse("registry_api:skill-search"), {"q": "payroll export"})
    assert _names(response) == ["admin.secret_payroll_export"]


def test_search_ranks_and_falls_back_to_namespace_recording_the_miss(catalog, agent_client, agent):
    url = reverse("registry_api:skill-search")
    assert _names(agent_client.get(url, {"q": "refund an order"}))[0] == "billing.create_refund_request"
    response = agent_client.get(url, {"q": "zebra crossing", "namespace": "docs"})
    assert response.json()["fallback"] == "namespace"
    assert _names(response) == ["docs.search_documentation"]
    miss = DiscoveryQuery.objects.get(query="zebra crossing")
    assert miss.result_count == 0 and miss.fell_back_to_namespace and miss.agent == agent
    assert _names(agent_client.get(url, {"q": "xylophone"})) == []
    assert DiscoveryQuery.objects.filter(query="xylophone", result_count=0).exists()


def test_namespace_found_in_the_query_is_the_fallback(catalog, agent_client):
    response = agent_client.get(reverse("registry_api:skill-search"), {"q": "billing stuff"})
    assert _names(response) == ["billing.create_refund_request"]


def test_search_query_count_is_bounded(catalog, agent_client, django_assert_max_num_queries):
    url = reverse("registry_api:skill-search")
    agent_client.get(url, {"q": "documentation"})
    with django_assert_max_num_queries(4):  # key lookup, latest snapshot, (ranking on PG), miss log
        agent_client.get(url, {"q": "documentation"})


@pytest.mark.parametrize(
    ("fmt", "name_key", "schema_key"),
    [("openai", "name", "parameters"), ("anthropic", "name", "input_schema"), ("mcp", "name", "inputSchema")],
)
def test_tool_definitions_per_format(catalog, agent_client, fmt, name_key, schema_key):
    response = agent_client.get(reverse("runs_api:tools"), {"format": fmt})
    tools = response.json()["tools"]
    names = sorted(tool[name_key] for tool in tools)
    if fmt == "mcp":
        assert names == ["billing.create_refund_request", "docs.search_documentation"]
        docs = next(t for t in tools if t["name"] == "docs.search_documentation")
        assert docs["annotations"]["readOnlyHint"] is True
    else:
        assert names == ["billing__create_refund_request", "docs__search_documentation"]
    assert all(tool[schema_key]["additionalProperties"] is False for tool in tools)
    if fmt == "openai":
        assert tools[0]["type"] == "function"


def test_tool_definitions_reject_unknown_format(catalog, agent_client):
    response = agent_client.get(reverse("runs_api:tools"), {"format": "gemini"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_format"


def test_discovery_filters_hook_narrows_everything(catalog, agent_client, monkeypatch):
    monkeypatch.setattr(
        discovery, "DISCOVERY_FILTERS", [lambda agent, entries: [e for e in entries if e["namespace"] != "billing"]]
    )
    assert _names(agent_client.get(reverse("registry_api:skill-search"), {"q": "refund"})) == []
    skills = agent_client.get(reverse("registry_api:snapshot-latest")).json()["snapshot"]["skills"]
    assert [s["name"] for s in skills] == ["docs.search_documentation"]


def test_agent_role_limits_discovery(catalog, acme):
    _, key = create_agent(tenant=acme, name="docs-bot", role="developer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    tools = client.get(reverse("runs_api:tools"), {"format": "anthropic"}).json()["tools"]
    assert [t["name"] for t in tools] == ["docs__search_documentation"]


def test_recorded_misses_keep_no_secret_the_agent_put_in_its_query(catalog, agent_client):
    secret = "sk-live" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    agent_client.get(reverse("registry_api:skill-search"), {"q": f"rotate key {secret}"})
    stored = DiscoveryQuery.objects.get()
    assert secret not in stored.query and stored.query.startswith("rotate key")
