"""Owners' own discovery evaluations (issue 38 part 5), tried by the owner and by whoever would abuse them: a
member of another team, a malformed or huge file, a search of another tenant."""

import json
import re

import pytest
from django.urls import reverse

from console.models import Membership, Role, Team, Tenant
from console.services import create_agent
from registry.models import DiscoveryQuery, EvaluationSet, LabelledIntent, OwnerEvaluation
from registry.namespaces import assign_namespace
from registry.owner_evaluations import MAX_UPLOAD_BYTES, run_owner_evaluation
from tests.conftest import login, make_user
from tests.runs.factories import make_skill

pytestmark = pytest.mark.django_db

REFUND, INVOICE, CARD = "billing.create_refund_request", "billing.find_invoice", "billing.update_card"
LABELLED = [
    {"intent": "create a refund request for the customer", "expected": [REFUND]},
    {"intent": "find the invoice of an order", "expected": [INVOICE]},
    {"intent": "update the card on file", "expected": [CARD]},
    {"intent": "find the invoice of an order", "expected": [CARD]},  # mislabelled: a miss, on purpose
]


def jsonl(rows) -> bytes:
    return "\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows).encode()


@pytest.fixture
def catalog(owner_team):
    for name in (REFUND, INVOICE, CARD):
        make_skill(name, team=owner_team, tenants=["acme"], publish=False)
    rivals = Team.objects.create(slug="hr-tools", name="HR tools")
    assign_namespace(namespace="hr", team=rivals)
    return make_skill("hr.approve_leave", team=rivals)  # publishes the snapshot


@pytest.fixture
def rival(catalog, globex):
    """A member of another team (and of another tenant): must not touch billing's sets."""
    user = make_user("rival", tenant=globex, roles=[Role.VIEWER])
    Team.objects.get(slug="hr-tools").members.add(user)
    return user


def _upload_api(client, rows, *, namespace="billing", name="intents", raw=None):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("intents.jsonl", raw if raw is not None else jsonl(rows), "application/jsonl")
    return client.post(reverse("registry_api:evaluations"), {"namespace": namespace, "name": name, "file": upload})


def _upload_console(client, rows, *, namespace="billing", raw=None):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("intents.jsonl", raw if raw is not None else jsonl(rows), "application/jsonl")
    return client.post(reverse("registry:evaluations"), {"namespace": namespace, "name": "intents", "file": upload})


def test_an_uploaded_set_runs_and_shows_recall_mrr_and_leaks(
    client, owner, catalog, django_capture_on_commit_callbacks
):
    login(client, owner)
    created = _upload_api(client, LABELLED)
    assert created.status_code == 201, created.content
    set_id = created.json()["id"]
    assert created.json()["intents"] == 4 and created.json()["team"] == "support-tools"
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post(reverse("registry_api:evaluation-run", args=[set_id]))
    assert queued.status_code == 202
    run = client.get(reverse("registry_api:evaluation-detail", args=[set_id])).json()["runs"][0]
    assert run["status"] == "done" and run["intents"] == 4 and run["leaks"] == 0
    assert (run["recall_at_1"], run["recall_at_5"], run["mrr"]) == (0.75, 0.75, 0.75)  # three of four first
    assert run["misses"] == [
        {"intent": "find the invoice of an order", "expected": [CARD], "got": [INVOICE], "rank": None}
    ]
    page = client.get(reverse("registry:evaluation", args=[set_id])).content.decode()
    assert "Recall@1" in page and "0.75" in page and "Over time" in page and "Built-in sets" in page


def test_the_owner_uploads_and_runs_from_the_console(client, owner, catalog, django_capture_on_commit_callbacks):
    login(client, owner)
    response = _upload_console(client, LABELLED[:3])
    evaluation_set = EvaluationSet.objects.get()
    assert response.status_code == 302 and response.url == reverse("registry:evaluation", args=[evaluation_set.pk])
    for _ in range(2):  # two runs: the history grows
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("registry:evaluation_run", args=[evaluation_set.pk]))
    assert list(evaluation_set.runs.values_list("status", "recall_at_1")) == [("done", 1.0), ("done", 1.0)]
    listing = client.get(reverse("registry:evaluations")).content.decode()
    assert "billing" in listing and "1.00" in listing


def test_the_list_page_costs_the_same_queries_for_one_set_or_six(client, owner, catalog):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    team = Team.objects.get(slug="support-tools")
    login(client, owner)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("registry:evaluations")).status_code == 200
        return len(captured)

    EvaluationSet.objects.create(team=team, namespace="billing", name="set-0")
    one = queries()
    for n in range(1, 6):
        OwnerEvaluation.objects.create(
            evaluation_set=EvaluationSet.objects.create(team=team, namespace="billing", name=f"set-{n}")
        )
    assert queries() == one


def test_a_run_delivered_twice_measures_once(owner, catalog):
    evaluation_set = EvaluationSet.objects.create(
        team=Team.objects.get(slug="support-tools"), namespace="billing", name="x"
    )
    LabelledIntent.objects.create(evaluation_set=evaluation_set, intent="update the card", expected=[CARD])
    run = OwnerEvaluation.objects.create(evaluation_set=evaluation_set)
    assert run_owner_evaluation(run.pk) is True
    assert run_owner_evaluation(run.pk) is False
    run.refresh_from_db()
    assert run.status == "done" and run.recall_at_1 == 1.0


@pytest.mark.parametrize(
    ("rows", "raw", "code", "says"),
    [
        ([LABELLED[0], '{"intent": "half a line", "expected": ['], None, "not_json", "line 2: not valid JSON"),
        ([LABELLED[0], {"intent": "x", "expected": ["billing.no_such"]}], None, "unknown_skill", "line 2: no skill"),
        ([{"intent": "approve my leave", "expected": ["hr.approve_leave"]}], None, "another_teams_skill", "line 1:"),
        ([{"intent": "refund", "expected": REFUND}], None, "bad_expected", "line 1: expected must list"),
        ([{"intent": "refund", "expected": [REFUND], "tenant": "globex"}], None, "unknown_key", "line 1: unknown"),
        ([["refund", REFUND]], None, "not_an_object", "line 1: each line must be an object"),
        ([], b"", "empty_file", "no intent"),
        ([], b"\xff\xfe" + "refund".encode("utf-16-le"), "not_utf8", "not UTF-8"),
        ([], jsonl([LABELLED[0]]) + b"\n" + b" " * (10 * 1024 * 1024), "file_too_large", "the limit is 1,000,000"),
    ],
)
def test_a_malformed_upload_names_the_line_and_stores_nothing(client, owner, catalog, rows, raw, code, says):
    login(client, owner)
    response = _upload_api(client, rows, raw=raw)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_labelled_intents"
    assert any(p["code"] == code and says in p["message"] for p in error["problems"]), error
    console = _upload_console(client, rows, raw=raw)
    assert console.status_code == 400 and says in console.content.decode()
    assert not EvaluationSet.objects.exists() and not LabelledIntent.objects.exists()


def test_a_failed_replacement_keeps_the_set_as_it_was(client, owner, catalog):
    login(client, owner)
    _upload_api(client, LABELLED)
    assert _upload_api(client, [LABELLED[0], "not json"]).status_code == 400
    assert LabelledIntent.objects.count() == 4


def test_the_file_limit_is_far_below_ten_megabytes():
    assert MAX_UPLOAD_BYTES <= 1_000_000


# --- another team ---------------------------------------------------------------------------------------


@pytest.fixture
def billing_set(client, owner, catalog):
    login(client, owner)
    set_id = _upload_api(client, LABELLED).json()["id"]
    client.logout()
    return EvaluationSet.objects.get(pk=set_id)


def test_a_member_of_another_team_cannot_read_run_or_upload_over_the_api(client, rival, billing_set):
    login(client, rival)
    assert client.get(reverse("registry_api:evaluation-detail", args=[billing_set.pk])).status_code == 404
    assert client.post(reverse("registry_api:evaluation-run", args=[billing_set.pk])).status_code == 404
    assert client.get(reverse("registry_api:evaluations")).json() == {"evaluation_sets": []}
    refused = _upload_api(client, [{"intent": "refund it", "expected": [REFUND]}])
    assert refused.status_code == 404
    assert not billing_set.runs.exists() and billing_set.intents.count() == 4


def test_a_member_of_another_team_cannot_read_run_or_upload_in_the_console(client, rival, billing_set):
    login(client, rival)
    assert client.get(reverse("registry:evaluation", args=[billing_set.pk])).status_code == 404
    assert client.post(reverse("registry:evaluation_run", args=[billing_set.pk])).status_code == 404
    added = client.post(
        reverse("registry:evaluation_add_search", args=[billing_set.pk]), {"search_id": 1, "expected": REFUND}
    )
    assert added.status_code == 404
    listing = client.get(reverse("registry:evaluations")).content.decode()
    assert "intents</a>" not in listing and 'value="billing"' not in listing
    assert _upload_console(client, LABELLED, namespace="billing").status_code == 200  # not a choice of theirs
    assert not billing_set.runs.exists() and EvaluationSet.objects.count() == 1


def test_a_member_of_no_team_gets_403_before_the_body_is_read(client, catalog, acme):
    viewer = make_user("viewer", tenant=acme, roles=[Role.VIEWER])
    login(client, viewer)
    assert _upload_api(client, LABELLED).status_code == 403
    assert _upload_console(client, LABELLED).status_code == 403
    assert not EvaluationSet.objects.exists()


def test_another_team_cannot_overwrite_a_set_by_reusing_its_name(client, rival, billing_set):
    login(client, rival)
    response = _upload_api(client, [{"intent": "approve my leave", "expected": ["hr.approve_leave"]}], namespace="hr")
    assert response.status_code == 201  # its own namespace, its own set
    assert billing_set.intents.count() == 4


# --- zero-result searches ----------------------------------------------------------------------------------


def _search_panel(html: str) -> str:
    return re.search(r'data-testid="zero-result-searches">(.*?)</div>', html, re.S).group(1)


@pytest.fixture
def searches(catalog, acme, globex):
    acme_bot = create_agent(tenant=acme, name="acme-refund-bot", role="support")[0]
    globex_bot = create_agent(tenant=globex, name="globex-secret-bot", role="support")[0]
    initech = Tenant.objects.create(slug="initech", name="Initech")
    initech_bot = create_agent(tenant=initech, name="initech-bot", role="support")[0]
    return {
        "acme": DiscoveryQuery.objects.create(query="reimburse a refund twice", result_count=0, agent=acme_bot),
        "globex": DiscoveryQuery.objects.create(query="globex refund ledger", result_count=0, agent=globex_bot),
        "initech": DiscoveryQuery.objects.create(query="initech refund words", result_count=0, agent=initech_bot),
        "found": DiscoveryQuery.objects.create(query="refund with one result", result_count=1, agent=acme_bot),
        "unrelated": DiscoveryQuery.objects.create(query="water the plants", result_count=0, agent=acme_bot),
    }


def test_the_owner_sees_only_their_tenants_zero_result_searches_without_tenant_or_agent(
    client, owner, billing_set, searches, globex
):
    Membership.objects.create(user=owner, tenant=Tenant.objects.get(slug="initech"), role=Role.VIEWER)
    panel = _search_panel(
        login(client, owner).get(reverse("registry:evaluation", args=[billing_set.pk])).content.decode()
    )
    assert "reimburse a refund twice" in panel
    assert "globex refund ledger" not in panel  # another tenant's words stay with it
    assert "initech refund words" not in panel  # a member there, but billing is not offered to initech
    assert "refund with one result" not in panel and "water the plants" not in panel
    for identity in ("acme", "Acme", "globex", "Globex", "acme-refund-bot", "initech"):
        assert identity not in panel.replace("initech refund", ""), identity


def test_one_click_labels_a_search_and_another_tenants_search_cannot_be_taken(client, owner, billing_set, searches):
    login(client, owner)
    url = reverse("registry:evaluation_add_search", args=[billing_set.pk])
    assert client.post(url, {"search_id": searches["acme"].pk, "expected": REFUND}).status_code == 302
    added = billing_set.intents.get(source="search")
    assert added.intent == "reimburse a refund twice" and added.expected == [REFUND]
    page = client.get(reverse("registry:evaluation", args=[billing_set.pk])).content.decode()
    assert "reimburse a refund twice" not in _search_panel(page)  # labelled: no longer offered
    assert client.post(url, {"search_id": searches["globex"].pk, "expected": REFUND}).status_code == 404
    assert billing_set.intents.filter(source="search").count() == 1


def test_the_demo_seeds_a_labelled_set_with_a_run_and_a_search_to_label(client):
    from airlock.demo import seed_all

    demo = seed_all()
    seed_all()  # idempotent
    evaluation_set = EvaluationSet.objects.get(namespace="support", name="user-intents")
    run = evaluation_set.runs.get()
    assert run.status == "done" and run.intents == 8 and run.leaks == 0 and 0 < run.recall_at_1 <= run.recall_at_5
    page = login(client, demo.users["olivia"]).get(reverse("registry:evaluation", args=[evaluation_set.pk]))
    assert "put the case on hold until the customer answers" in _search_panel(page.content.decode())
