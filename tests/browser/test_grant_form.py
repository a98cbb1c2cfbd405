"""The grant form in a real browser: picking a role and a namespace updates the preview (htmx, under the page's
Content-Security-Policy) and warns of the destructive skill it covers; a viewer gets the styled 403."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.runs.factories import make_skill

pytestmark = pytest.mark.browser


def test_picking_a_namespace_previews_its_skills_and_warns(asgi_live_server, login_as, tenant_admin, agent):
    make_skill("billing.read_invoice")
    make_skill("billing.delete_invoice", effect="destructive")
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("policies:grant_list", args=["acme"]))
    page.select_option("#id_agent_role", "support")
    page.select_option("#id_skill_pattern", "billing.*")
    preview = page.locator("#grant-preview")
    expect(preview).to_contain_text("billing.* covers 2 current skills")
    expect(preview.locator(".callout.bad")).to_contain_text("billing.delete_invoice")
    page.select_option("#id_skill_pattern", "billing.read_invoice")
    expect(preview).to_contain_text("covers 1 current skill")
    expect(preview.locator(".callout.bad")).to_have_count(0)


def test_a_viewer_sees_which_role_and_whom_to_ask(asgi_live_server, login_as, viewer, tenant_admin):
    page = login_as(viewer)
    response = page.goto(asgi_live_server.url + reverse("policies:grant_list", args=["acme"]))
    assert response.status == 403
    expect(page.locator("h1")).to_have_text("This page needs the admin role in Acme Corp")
    expect(page.locator(".error-page")).to_contain_text("admin@example.com")
