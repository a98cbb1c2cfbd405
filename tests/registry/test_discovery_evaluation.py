"""The discovery evaluation harness on a small catalog (smoke), its command, its oracle, the owners' panel,
and the manifest's `synonyms` / `examples` / `tags` that feed the ranking."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from airlock.demo import seed_all
from bench import discovery as harness
from console.models import Membership
from registry.models import DiscoveryEvaluation, DiscoveryQuery
from registry.services import record_discovery_evaluation
from tests.conftest import login
from tests.registry.factories import manifest


def test_the_labelled_set_is_large_and_varied():
    intents = harness.demo_catalog().intents + harness.generated_catalog(1000).intents
    kinds = {intent.kind for intent in intents}
    assert len(intents) >= 150
    assert {"paraphrase", "synonym", "typo", "multistep", "none"} <= kinds
    assert sum(1 for intent in intents if not intent.expected) >= 20


def test_the_generated_catalog_is_deterministic_and_overlapping():
    first, second = harness.generated_catalog(1000), harness.generated_catalog(1000)
    assert [m["name"] for m, _ in first.manifests] == [m["name"] for m, _ in second.manifests]
    assert [i.query for i in first.intents] == [i.query for i in second.intents]
    namespaces = {m["name"].split(".")[0] for m, _ in first.manifests}
    assert len(first.manifests) == 1000 and len(namespaces) == 40
    tickets = {m["name"].split(".")[0] for m, _ in first.manifests if m["name"].endswith("_ticket")}
    assert len(tickets) > 1  # the same object in several namespaces, as in real catalogs


def test_the_oracle_forbids_other_tenants_other_roles_ungranted_and_retired_skills():
    catalog = harness.demo_catalog()
    support = harness.visible_names(catalog, "support")
    assert harness.LEDGER not in support  # offered to globex only
    assert harness.MERGE not in support  # retired
    assert "admin.delete_user_permanently" not in support  # granted, but offered to the admin role only
    assert "orders.lookup_order" not in support  # deprecated: hidden from discovery
    assert harness.visible_names(catalog, "developer") == {harness.DOCS}
    assert harness.LEDGER in harness.visible_names(catalog, "billing")


@pytest.mark.django_db(transaction=True)
def test_the_harness_meets_its_targets_on_a_small_catalog_with_no_leak():
    report = harness.evaluate(scale_versions=0, generated_skills=120)
    demo, generated = report.catalogs["demo"], report.catalogs["generated"]
    assert demo.leaks == 0 and generated.leaks == 0
    assert demo.recall_at_5 >= 0.9 and demo.recall_at_1 >= 0.7
    assert generated.recall_at_5 >= 0.9 and generated.recall_at_1 >= 0.7
    assert demo.zero_result_recall >= 0.8
    assert {"billing", "customer", "docs", "support"} <= set(report.namespaces["demo"])
    names = [figure.name for figure in report.figures()]
    assert any(name.endswith("demo: recall@5") for name in names)


@pytest.mark.django_db(transaction=True)
def test_the_command_prints_the_figures_and_stores_them_per_namespace():
    out = StringIO()
    call_command("evaluate_discovery", "--flush-this-database", "--scale-versions", "0", "--skills", "120", stdout=out)
    text = out.getvalue()
    assert "demo: recall@5" in text and "generated: leaks" in text
    stored = DiscoveryEvaluation.objects.get(catalog="demo", namespace="billing")
    assert stored.leaks == 0 and stored.intents > 0 and 0 <= stored.recall_at_5 <= 1


@pytest.mark.django_db
def test_a_new_run_replaces_the_figures_and_drops_gone_namespaces():
    scores = {"intents": 4, "recall_at_1": 1.0, "recall_at_5": 1.0, "mrr": 1.0, "p95_ms": 3.0, "leaks": 0}
    record_discovery_evaluation(catalog="demo", database="SQLite", namespaces={"billing": scores, "old": scores})
    record_discovery_evaluation(
        catalog="demo", database="SQLite", namespaces={"billing": {**scores, "recall_at_5": 0.5}}
    )
    assert list(DiscoveryEvaluation.objects.values_list("namespace", "recall_at_5")) == [("billing", 0.5)]


@pytest.fixture
def demo(db):
    return seed_all()


def test_owners_see_the_figures_and_their_misses_as_candidate_examples(client, demo):
    scores = {"intents": 12, "recall_at_1": 0.75, "recall_at_5": 0.92, "mrr": 0.8, "p95_ms": 3.0, "leaks": 0}
    record_discovery_evaluation(catalog="demo", database="SQLite", namespaces={"billing": scores})
    DiscoveryQuery.objects.create(
        query="give the customer money back", namespace="billing", result_count=0, agent=demo.agents["acme/support-bot"]
    )
    DiscoveryQuery.objects.create(
        query="globex secret words", namespace="billing", result_count=0, agent=demo.agents["globex/billing-bot"]
    )
    olivia = demo.users["olivia"]  # owns billing.create_refund_request
    Membership.objects.filter(user=olivia, tenant=demo.tenants["globex"]).delete()  # acme only, here
    page = login(client, olivia).get(reverse("registry:skill", args=["billing.create_refund_request"]))
    body = page.content.decode()
    assert "Discovery quality in billing" in body and "0.92" in body
    assert "Candidate examples" in body and "give the customer money back" in body
    assert "globex secret words" not in body  # another tenant's words stay with that tenant
    catalog = client.get(reverse("registry:catalog")).content.decode()
    assert "Discovery quality" in catalog and "billing" in catalog


def test_a_reader_who_owns_nothing_gets_no_candidate_examples(client, demo):
    alice = demo.users["alice"]  # an approver of acme, in no owning team
    page = login(client, alice).get(reverse("registry:skill", args=["billing.create_refund_request"]))
    assert "Candidate examples" not in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "path", "code"),
    [
        ({"synonyms": ["reimburse", "Reimburse "]}, "$.synonyms[1]", "duplicate_entry"),
        ({"examples": ["refund this order", "     "]}, "$.examples[1]", "blank_entry"),
        ({"synonyms": "reimburse"}, "$.synonyms", "schema"),
        ({"tags": ["Money Back"]}, "$.tags[0]", "schema"),
        ({"examples": ["x" * 201]}, "$.examples[0]", "schema"),
        ({"synonyms": ["r"] * 31}, "$.synonyms", "schema"),
    ],
)
def test_malformed_discovery_words_are_refused_with_their_path(client, owner, extra, path, code):
    body = {**manifest(), **extra}
    response = login(client, owner).post(reverse("registry_api:skill-validate"), {"manifest": body}, "application/json")
    assert response.status_code == 200, response.content
    errors = response.json()["errors"]
    assert any(e["path"] == path and e["code"] == code and e["message"] for e in errors), errors


@pytest.mark.django_db
def test_well_formed_discovery_words_are_accepted(client, owner):
    body = {
        **manifest(),
        "title": "Search the docs",
        "synonyms": ["knowledge base", "manual"],
        "examples": ["how do I rotate an API key"],
        "tags": ["docs", "read-only"],
    }
    response = login(client, owner).post(reverse("registry_api:skill-validate"), {"manifest": body}, "application/json")
    assert response.json()["errors"] == []
