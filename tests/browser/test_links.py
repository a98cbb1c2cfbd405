"""The first minute in a real browser: home → inbox, and run ⇄ trace ⇄ why by clicking, not typing ids."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.runs.test_links import run_needing_approval

pytestmark = pytest.mark.browser


@pytest.fixture
def waiting(asgi_live_server, settings, agent_client, acme):
    """A run waiting for approval, created through the API (the test client's host is `testserver`)."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    return run_needing_approval(agent_client, acme)


def test_approver_goes_from_home_to_the_inbox(asgi_live_server, login_as, approver, waiting):
    page = login_as(approver)
    page.goto(asgi_live_server.url + reverse("console:home"))
    cta = page.locator("#inbox-cta")
    expect(cta).to_contain_text("1 request waits for your decision")
    cta.get_by_role("link", name="Open the inbox →").click()
    expect(page).to_have_url(asgi_live_server.url + reverse("approvals:inbox"))
    expect(page.locator("h1")).to_have_text("Approvals")


def test_run_trace_and_why_link_to_each_other(asgi_live_server, login_as, viewer, waiting):
    run, _, approval = waiting
    page = login_as(viewer)
    run_url = asgi_live_server.url + reverse("runs:run_detail", args=[run.pk])
    page.goto(run_url)
    page.get_by_role("link", name="Open the trace timeline →").click()
    expect(page).to_have_url(asgi_live_server.url + reverse("traces:detail", args=[run.trace.pk]))
    page.locator("dl.facts").get_by_role("link", name=str(run.pk)).click()
    expect(page).to_have_url(run_url)
    page.get_by_role("link", name="why? →").click()
    expect(page.locator("h1")).to_have_text("Decision path")
    expect(page.get_by_role("link", name=f"open request #{approval.pk}")).to_be_visible()
    page.get_by_role("link", name="← The run").click()
    expect(page).to_have_url(run_url)
    page.get_by_role("link", name=f"approval #{approval.pk}").click()
    expect(page).to_have_url(asgi_live_server.url + reverse("approvals:detail", args=[approval.pk]))
