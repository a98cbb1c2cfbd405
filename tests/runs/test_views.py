"""Console run pages: scoped by tenant, showing calls, verdicts with reasons, taint and status."""

import pytest
from django.urls import reverse

from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule, run_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_with_calls(acme, agent_client):
    make_skill("support.note", effect="write", adapter="python:test.echo", publish=False)
    make_skill("support.peek", adapter="python:test.echo")
    grant(acme, "support.*")
    published_policy(
        [
            rule(
                "no-notes-for-vips",
                "deny",
                'skill.effect == "write" && "vip" in end_user.roles',
                "VIP accounts: humans only",
            )
        ],
        scope="tenant",
        tenant=acme,
    )
    run = start_run(agent_client, end_user_roles=["vip"])
    post_calls(
        agent_client,
        run["run_id"],
        [call("c1", "support.peek", taint="read a customer email"), call("c2", "support.note", {"text": "hi"})],
    )
    return run


def test_run_page_shows_calls_verdicts_reasons_and_taint(client, viewer, run_with_calls):
    login(client, viewer)
    page = client.get(reverse("runs:run_detail", args=[run_with_calls["run_id"]]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "VIP accounts: humans only" in html and "no-notes-for-vips" in html
    assert "tainted" in html and "read a customer email" in html


def test_run_list_is_scoped_to_the_tenant(client, viewer, outsider, run_with_calls, globex):
    from console.services import create_agent

    globex_agent, _ = create_agent(tenant=globex, name="g", role="billing")
    run_for(globex_agent, task="globex secret task")
    login(client, viewer)
    html = client.get(reverse("runs:run_list")).content.decode()
    assert "help" in html and "globex secret task" not in html
    login(client, outsider)
    assert client.get(reverse("runs:run_detail", args=[run_with_calls["run_id"]])).status_code == 404


def test_run_list_query_count(client, viewer, agent, django_assert_max_num_queries):
    for _ in range(5):
        run_for(agent)
    login(client, viewer)
    client.get(reverse("runs:run_list"))
    with django_assert_max_num_queries(12):
        assert client.get(reverse("runs:run_list")).status_code == 200


def test_dashboard_card_counts_calls_and_errors(viewer, run_with_calls):
    from runs.dashboard import call_cards

    [card] = call_cards(viewer)
    assert card["value"] == 2 and "50.0%" in card["hint"]
