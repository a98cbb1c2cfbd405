"""Trace pages link to the run, the approval request and filtered lists, and only for readers of the whole trace."""

from urllib.parse import urlencode

import pytest
from django.urls import reverse
from django.utils.html import escape

from console.models import Team
from tests.conftest import make_user
from tests.runs.test_links import run_needing_approval
from traces.models import Span

pytestmark = pytest.mark.django_db


def href(url: str, **query: str) -> str:
    return escape(f"{url}?{urlencode(query)}")


@pytest.fixture
def waiting(agent_client, acme):
    return run_needing_approval(agent_client, acme)


def _call_span(tool_call) -> Span:
    return Span.objects.filter(call=tool_call, kind="tool_call").first() or Span.objects.filter(call=tool_call).first()


def test_trace_page_links_its_run_agent_and_end_user(client, viewer, waiting):
    run, _, approval = waiting
    client.force_login(viewer)
    html = client.get(reverse("traces:for_run", args=[run.pk]), follow=True).content.decode()
    assert f'href="{reverse("runs:run_detail", args=[run.pk])}"' in html
    assert f'href="{href(reverse("traces:list"), tenant="acme", agent="support-bot")}"' in html
    assert f'href="{href(reverse("traces:list"), tenant="acme", end_user="ann@example.com")}"' in html
    assert f'href="{href(reverse("runs:run_list"), tenant="acme", agent="support-bot")}"' in html
    assert f'href="{href(reverse("runs:run_list"), tenant="acme", end_user="ann@example.com")}"' in html
    assert f'href="{reverse("approvals:detail", args=[approval.pk])}"' in html  # the approval span's row


def test_span_panel_of_a_call_links_its_approval_run_and_skill(client, viewer, waiting):
    run, tool_call, approval = waiting
    span = _call_span(tool_call)
    client.force_login(viewer)
    panel = client.get(reverse("traces:span", args=[run.trace.pk, span.span_id])).content.decode()
    assert f'href="{reverse("runs:run_detail", args=[run.pk])}"' in panel
    assert f'href="{reverse("approvals:detail", args=[approval.pk])}"' in panel
    assert f'href="{reverse("registry:skill", args=["support.send_email"])}"' in panel


def test_why_link_is_a_page_and_htmx_gets_the_panel(client, viewer, waiting):
    run, tool_call, approval = waiting
    client.force_login(viewer)
    url = reverse("traces:why", args=[run.trace.pk, tool_call.pk])
    page = client.get(url).content.decode()
    assert "<html" in page and "Was approval required" in page
    assert f'href="{reverse("runs:run_detail", args=[run.pk])}"' in page
    assert f'href="{reverse("traces:detail", args=[run.trace.pk])}"' in page
    assert f'href="{reverse("approvals:detail", args=[approval.pk])}"' in page
    panel = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in panel and "Was approval required" in panel


def test_trace_list_links_agent_and_end_user_to_filtered_lists(client, viewer, waiting):
    client.force_login(viewer)
    html = client.get(reverse("traces:list")).content.decode()
    assert f'href="{escape("?" + urlencode({"tenant": "acme", "agent": "support-bot"}))}"' in html
    assert f'href="{escape("?" + urlencode({"tenant": "acme", "end_user": "ann@example.com"}))}"' in html


def test_skill_owner_of_another_tenant_gets_no_links_into_the_tenant(client, waiting, globex):
    """An owner reads its skill's spans of acme's trace, but acme's run and approval stay out of reach."""
    run, tool_call, approval = waiting
    owner_elsewhere = make_user("gx-owner")
    Team.objects.get(slug="support-tools").members.add(owner_elsewhere)
    client.force_login(owner_elsewhere)
    trace = client.get(reverse("traces:detail", args=[run.trace.pk]))
    assert trace.status_code == 200
    html = trace.content.decode()
    for hidden in (
        reverse("runs:run_detail", args=[run.pk]),
        reverse("approvals:detail", args=[approval.pk]),
        "ann@example.com",
        reverse("runs:run_list") + "?",
    ):
        assert hidden not in html, hidden
    panel = client.get(reverse("traces:span", args=[run.trace.pk, _call_span(tool_call).span_id])).content.decode()
    assert reverse("runs:run_detail", args=[run.pk]) not in panel
    assert reverse("approvals:detail", args=[approval.pk]) not in panel
    why = client.get(reverse("traces:why", args=[run.trace.pk, tool_call.pk])).content.decode()
    assert reverse("runs:run_detail", args=[run.pk]) not in why
    assert reverse("approvals:detail", args=[approval.pk]) not in why
    assert client.get(reverse("runs:run_detail", args=[run.pk])).status_code == 404
    assert client.get(reverse("approvals:detail", args=[approval.pk])).status_code == 404


def test_outsider_gets_404_for_every_linked_page(client, outsider, waiting):
    run, tool_call, approval = waiting
    client.force_login(outsider)
    for url in (
        reverse("traces:for_run", args=[run.pk]),
        reverse("traces:detail", args=[run.trace.pk]),
        reverse("traces:why", args=[run.trace.pk, tool_call.pk]),
        reverse("runs:run_detail", args=[run.pk]),
        reverse("approvals:detail", args=[approval.pk]),
    ):
        assert client.get(url).status_code == 404, url
