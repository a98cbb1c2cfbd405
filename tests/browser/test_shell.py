"""The console shell in a real browser: log in with the form, see the shell, switch tenant."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from console.models import Membership, Role

pytestmark = pytest.mark.browser


def test_log_in_see_the_shell_and_switch_tenant(asgi_live_server, page, approver, globex):
    Membership.objects.create(tenant=globex, user=approver, role=Role.VIEWER)
    page.goto(asgi_live_server.url + reverse("console:home"))
    expect(page).to_have_url(asgi_live_server.url + reverse("console:login") + "?next=/")
    page.fill("#id_username", "approver")
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    expect(page).to_have_url(asgi_live_server.url + reverse("console:home"))
    expect(page.locator("h1")).to_have_text("Acme Corp")
    expect(page.locator("nav.nav")).to_contain_text("Approvals")
    switcher = page.locator("#tenant-select")
    expect(switcher).to_have_value("acme")
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).display") != "none"

    switcher.select_option("globex")
    expect(page.locator("h1")).to_have_text("Globex")
    expect(page.locator("#tenant-select")).to_have_value("globex")


def test_login_as_plants_a_session(asgi_live_server, login_as, tenant_admin):
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("console:member_list", args=["acme"]))
    expect(page.locator("h1")).to_have_text("Members")
    expect(page.locator("table").first).to_contain_text("admin")


def test_health_over_the_live_server(asgi_live_server, page):
    response = page.request.get(asgi_live_server.url + "/healthz")
    assert response.status in {200, 503}
    assert response.json()["checks"]["database"]["status"] == "ok"
