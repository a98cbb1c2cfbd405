"""Skill search as an attacker sees it: ranking (field weights, synonyms, examples, typos, multi-step) never
widens what an agent may discover; filters by effect and data class only narrow; bad input is a clear 400."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console.models import Team
from console.services import create_agent
from policies.models import Grant
from policies.services import revoke_grant
from registry.models import Skill, SkillVersion
from registry.services import retire_skill
from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, manifest

pytestmark = pytest.mark.django_db

URL = "registry_api:skill-search"


def _names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def _described(name: str, description: str, *, extra: dict | None = None, **kwargs) -> SkillVersion:
    """An active version with this description (and optional synonyms/examples), as publication stores it."""
    body = {**manifest(name, **kwargs), "description": description, **(extra or {})}
    team = Team.objects.get_or_create(slug="support-tools", defaults={"name": "Support tools"})[0]
    skill = Skill.objects.create(skill_id=body["skill_id"], name=name, namespace=name.split(".")[0], owner_team=team)
    return SkillVersion.objects.create(
        skill=skill,
        version="1.0.0",
        major=1,
        status="active",
        manifest=body,
        description=description,
        effect=body["risk"]["effect"],
        data_classification=body["risk"]["data_classification"],
    )


@pytest.fixture
def catalog(acme, globex, owner_team):
    """acme support is granted billing.*, support.* and docs.*; globex has its own refund skill."""
    for pattern in ("billing.*", "support.*", "docs.*"):
        grant(acme, pattern)
    grant(globex, "billing.*")
    _described("billing.create_refund", "Create a refund request for a paid order; money goes back to the card.")
    _described(
        "support.update_ticket_status",
        "Change a support ticket's status. Side effect: updates the ticket.",
        effect="write",
    )
    _described("docs.search_documentation", "Search the product documentation. Read-only.", data="public")
    _described(
        "billing.globex_refund_override",
        "Refund override for globex finance staff: money back without a request.",
        tenants=["globex"],
    )
    _described("billing.refund_for_admins", "Refund any payment immediately; admins only.", roles=["admin"])
    _described("admin.purge_refunds", "Purge every refund record of a tenant.")  # never granted to acme
    publish_snapshot(reason="test catalog")


@pytest.mark.parametrize(
    "query",
    [
        "refund override",
        "globex refund override",
        "refund for admins",
        "purge refunds",
        "refnud overide",  # the typo path must not reach past the permitted set either
        "money back without a request",
    ],
)
def test_no_query_reveals_another_tenants_an_ungranted_or_another_roles_skill(catalog, agent_client, query):
    body = agent_client.get(reverse(URL), {"q": query, "limit": 50}).content.decode()
    for hidden in ("globex_refund_override", "refund_for_admins", "purge_refunds"):
        assert hidden not in body


def test_the_other_tenant_finds_its_own_skill_and_not_acmes(catalog, outsider_agent_client):
    names = _names(outsider_agent_client.get(reverse(URL), {"q": "refund override"}))
    assert names[0] == "billing.globex_refund_override"
    assert not {"support.update_ticket_status", "docs.search_documentation"} & set(names)


def test_a_retired_skill_disappears_from_search(catalog, agent_client, owner):
    assert "billing.create_refund" in _names(agent_client.get(reverse(URL), {"q": "refund a paid order"}))
    retire_skill(skill=Skill.objects.get(name="billing.create_refund"), user=owner)
    publish_snapshot(reason="retired")
    assert "billing.create_refund" not in _names(agent_client.get(reverse(URL), {"q": "refund a paid order"}))


def test_a_revoked_grant_hides_the_namespace(catalog, agent_client, acme, owner):
    revoke_grant(grant=Grant.objects.get(tenant=acme, skill_pattern="docs.*"), revoked_by=owner)
    assert _names(agent_client.get(reverse(URL), {"q": "search documentation"})) == []


def test_synonyms_examples_and_typos_rank_the_right_skill_first(acme, agent_client):
    grant(acme, "billing.*")
    _described(
        "billing.create_refund",
        "Create a refund request for a paid order.",
        extra={"synonyms": ["reimburse"], "examples": ["the customer was charged twice"]},
    )
    _described("billing.list_invoices", "List the customer's invoices, newest first. Read-only.")
    publish_snapshot(reason="test")
    for query in ("reimburse the customer", "customer was charged twice", "refnud an order", "create refund"):
        assert _names(agent_client.get(reverse(URL), {"q": query}))[0] == "billing.create_refund", query


def test_a_multi_step_task_finds_each_step(acme, agent_client):
    grant(acme, "billing.*")
    _described("billing.create_refund", "Create a refund request for a paid order.")
    _described("billing.list_invoices", "List the customer's invoices, newest first. Read-only.")
    publish_snapshot(reason="test")
    names = _names(agent_client.get(reverse(URL), {"q": "list the invoices and then refund the order"}))
    assert set(names[:2]) == {"billing.create_refund", "billing.list_invoices"}


def test_a_request_for_nothing_offered_answers_nothing(catalog, agent_client):
    for query in ("book a flight to Lisbon", "what's the weather tomorrow"):
        assert _names(agent_client.get(reverse(URL), {"q": query})) == []


def test_effect_and_data_class_filters_only_narrow(catalog, agent_client):
    url = reverse(URL)
    assert _names(agent_client.get(url, {"q": "ticket status", "effect": "read"})) == []
    assert _names(agent_client.get(url, {"q": "ticket status", "effect": "read,write"})) == [
        "support.update_ticket_status"
    ]
    everything = _names(agent_client.get(url, {"effect": "read", "limit": 50}))
    assert "support.update_ticket_status" not in everything and "billing.create_refund" in everything
    assert _names(agent_client.get(url, {"data_class": "public"})) == ["docs.search_documentation"]
    reads = _names(agent_client.get(url, {"q": "refund override", "effect": "read", "limit": 50}))
    assert "billing.globex_refund_override" not in reads  # a filter never widens the permitted set


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"q": "refund", "effect": "reads"}, "invalid_filter"),
        ({"q": "refund", "effect": "read,delete"}, "invalid_filter"),
        ({"q": "refund", "data_class": "secret"}, "invalid_filter"),
        ({"q": "refund", "limit": "ten"}, "invalid_limit"),
        ({"q": "refund\x00"}, "bad_request"),  # console.unsafe_input, before the view
    ],
)
def test_malformed_filters_get_a_clear_400(catalog, agent_client, params, code):
    response = agent_client.get(reverse(URL), params)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["message"]


def test_a_revoked_agent_cannot_search(catalog, acme):
    agent, key = create_agent(tenant=acme, name="gone-bot", role="support")
    agent.revoked_at = agent.created_at
    agent.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get(reverse(URL), {"q": "refund"}).status_code == 401
