"""Run pages link to what they name: the trace, each call's approval and "why", and filtered run lists."""

from urllib.parse import urlencode

import pytest
from django.urls import reverse
from django.utils.html import escape

from approvals.models import ApprovalRequest
from runs.models import Run, ToolCall
from tests.conftest import login
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, run_for

pytestmark = pytest.mark.django_db


def run_needing_approval(agent_client, tenant) -> tuple[Run, ToolCall, ApprovalRequest]:
    """A run through the gate whose one call (an external email) waits for an approver."""
    make_skill("support.send_email", effect="external", adapter="python:demo.send_email")
    grant(tenant, "support.*")
    started = start_run(agent_client, end_user="ann@example.com")
    arguments = {"to": "ada@example.org", "subject": "Refund", "body_text": "On its way."}
    result = post_calls(agent_client, started["run_id"], [call("c1", "support.send_email", arguments)]).json()
    approval = ApprovalRequest.objects.get(pk=result["results"][0]["approval_id"])
    return Run.objects.get(pk=started["run_id"]), approval.call, approval


def href(url: str, **query: str) -> str:
    """An href as the templates write it: the query joined with `&amp;` in HTML."""
    return escape(f"{url}?{urlencode(query)}" if query else url)


@pytest.fixture
def waiting(agent_client, acme):
    return run_needing_approval(agent_client, acme)


def test_run_page_links_trace_approval_why_skill_and_filtered_lists(client, viewer, waiting):
    run, tool_call, approval = waiting
    login(client, viewer)
    html = client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    runs_url = reverse("runs:run_list")
    assert f'href="{reverse("traces:for_run", args=[run.pk])}"' in html
    assert f'href="{reverse("approvals:detail", args=[approval.pk])}"' in html
    assert f'href="{reverse("traces:why", args=[run.trace.pk, tool_call.pk])}"' in html
    assert f'href="{reverse("registry:skill", args=["support.send_email"])}"' in html
    assert f'href="{href(runs_url, tenant="acme", agent="support-bot")}"' in html
    assert f'href="{href(runs_url, tenant="acme", end_user="ann@example.com")}"' in html
    assert f'href="{href(runs_url, tenant="acme", skill="support.send_email")}"' in html


def test_run_page_without_a_trace_offers_no_dead_links(client, viewer, agent):
    make_skill("support.peek", adapter="python:test.echo")
    run = run_for(agent)  # created without the API: no trace row, no spans
    login(client, viewer)
    html = client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    assert reverse("traces:for_run", args=[run.pk]) not in html
    assert "No trace recorded" in html


def test_run_list_links_each_run_its_agent_and_end_user(client, viewer, waiting):
    run, _, _ = waiting
    login(client, viewer)
    html = client.get(reverse("runs:run_list")).content.decode()
    runs_url = reverse("runs:run_list")
    assert f'href="{reverse("runs:run_detail", args=[run.pk])}"' in html
    assert f'href="{href(runs_url, agent="support-bot")}"' in html
    assert f'href="{href(runs_url, end_user="ann@example.com")}"' in html


def _listed(client, **query) -> set[str]:
    page = client.get(reverse("runs:run_list"), query)
    assert page.status_code == 200
    return {str(run.pk) for run in page.context["runs"]}


def test_run_list_filters_by_agent_end_user_and_skill(client, viewer, agent, waiting):
    from console.services import create_agent

    run, _, _ = waiting
    other_agent, _ = create_agent(tenant=agent.tenant, name="docs-bot", role="docs")
    other = run_for(other_agent)
    other.end_user = "bob@example.com"
    other.save()
    login(client, viewer)
    assert _listed(client) == {str(run.pk), str(other.pk)}
    assert _listed(client, agent="support-bot") == {str(run.pk)}
    assert _listed(client, agent="docs-bot") == {str(other.pk)}
    assert _listed(client, end_user="ann@example.com") == {str(run.pk)}
    assert _listed(client, skill="support.send_email") == {str(run.pk)}
    assert _listed(client, skill="support.nothing") == set()


def test_run_list_filters_never_show_another_tenants_runs(client, viewer, outsider, globex, waiting):
    from console.services import create_agent

    run, _, _ = waiting
    globex_agent, _ = create_agent(tenant=globex, name="support-bot", role="support")
    secret = run_for(globex_agent, task="globex secret task")
    secret.end_user = "ann@example.com"
    secret.save()
    ToolCall.objects.create(run=secret, call_id="g1", name="support.send_email")
    login(client, viewer)  # a member of acme only
    for query in (
        {"agent": "support-bot"},
        {"end_user": "ann@example.com"},
        {"skill": "support.send_email"},
        {"tenant": "globex"},
        {"tenant": "globex", "agent": "support-bot"},
    ):
        assert str(secret.pk) not in _listed(client, **query), query
    assert "globex secret task" not in client.get(reverse("runs:run_list"), {"tenant": "globex"}).content.decode()
    login(client, outsider)  # every role in globex, nothing in acme
    assert str(run.pk) not in _listed(client, tenant="acme", agent="support-bot")
    assert _listed(client, tenant="acme") == set()


def test_run_list_tenant_filter_picks_among_the_members_tenants(client, viewer, globex, waiting):
    from console.models import Membership, Role
    from console.services import create_agent

    run, _, _ = waiting
    Membership.objects.create(tenant=globex, user=viewer, role=Role.VIEWER)
    globex_agent, _ = create_agent(tenant=globex, name="billing-bot", role="billing")
    theirs = run_for(globex_agent)
    login(client, viewer)
    assert _listed(client, tenant="globex") == {str(theirs.pk)}
    assert _listed(client, tenant="acme") == {str(run.pk)}


def test_filtered_run_list_query_count(client, viewer, agent, waiting, django_assert_max_num_queries):
    for _ in range(5):
        run_for(agent)
    login(client, viewer)
    query = {"agent": "support-bot", "end_user": "u-1", "skill": "support.send_email", "tenant": "acme"}
    client.get(reverse("runs:run_list"), query)
    with django_assert_max_num_queries(12):
        assert client.get(reverse("runs:run_list"), query).status_code == 200


def test_run_page_query_count_does_not_grow_with_calls(
    client, viewer, agent_client, acme, django_assert_max_num_queries
):
    make_skill("support.peek", adapter="python:test.echo")
    run, _, _ = run_needing_approval(agent_client, acme)
    login(client, viewer)
    client.get(reverse("runs:run_detail", args=[run.pk]))
    with django_assert_max_num_queries(20) as few:
        client.get(reverse("runs:run_detail", args=[run.pk]))
    baseline = len(few)  # read now: the next request resets the connection's query log
    post_calls(agent_client, str(run.pk), [call(f"p{i}", "support.peek") for i in range(5)])
    assert ToolCall.objects.filter(run=run).count() == 6
    with django_assert_max_num_queries(baseline):
        assert client.get(reverse("runs:run_detail", args=[run.pk])).status_code == 200
