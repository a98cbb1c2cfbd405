"""Deciding from outside the console, in a real browser: the approver opens an e-mail's link, reads
the request and approves from the confirmation page; a forwarded link refuses another approver.
The link-Slack page as the approver proposing a link (Slack confirms it) and as a viewer who must not. A tenant admin
saves the Slack signing secret and never sees it again."""

import os
import re
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from approvals import decision_links, slack, slack_linking
from approvals.models import ApprovalNotice, ApprovalStatus, NotifyMode, SlackLink
from approvals.notifications import channels_of
from tests.approvals.factories import open_request

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("AIRLOCK_SHOTS", Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"))


def _email_link(acme, agent, approver) -> tuple:
    approval = open_request(tenant=acme, agent=agent)
    notice, _ = ApprovalNotice.objects.get_or_create(  # committed: the on-commit notice may already exist
        approval=approval, user=approver, defaults={"tenant": acme, "mode": NotifyMode.IMMEDIATELY}
    )
    return approval, reverse("approvals:email_decision", args=[decision_links.token_of(notice)])


def test_the_recipient_approves_from_the_emails_link(asgi_live_server, login_as, approver, agent, acme):
    approval, path = _email_link(acme, agent, approver)
    page = login_as(approver)
    page.goto(asgi_live_server.url + path)
    panel = page.locator("[data-email-decision]")
    expect(panel).to_be_visible()
    expect(page.locator("h1")).to_contain_text(approval.skill_name)
    page.screenshot(path=str(SHOTS / "email-decision.png"), full_page=True)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING  # opening the page decided nothing
    panel.get_by_role("button", name="Approve").click()
    expect(page.locator("ul.messages")).to_contain_text(f"Request {approval.pk}")
    approval.refresh_from_db()
    assert approval.decided_by == approver and approval.decided_via == "email"
    page.goto(asgi_live_server.url + path)
    expect(page.locator("[data-link-used]")).to_be_visible()


def test_a_forwarded_link_refuses_another_approver(asgi_live_server, login_as, approver, second_approver, agent, acme):
    approval, path = _email_link(acme, agent, approver)
    page = login_as(second_approver)
    response = page.goto(asgi_live_server.url + path)
    assert response.status == 403
    expect(page.locator("body")).to_contain_text("sent to another account")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING


def test_the_approver_proposes_a_slack_link_and_slack_confirms_it(asgi_live_server, login_as, approver, acme):
    """The page names the Slack user, workspace and console account, links nothing, and shows the code;
    the link holds once that Slack user types the code in Slack and confirms (approvals.slack_linking,
    driven as Slack in tests/approvals/test_slack_link.py)."""
    token = slack.link_token(tenant=acme, team_id="T0ACME", user_id="U0CASEY", username="casey")
    page = login_as(approver)
    page.goto(asgi_live_server.url + reverse("approvals:slack_link", args=[token]))
    confirm = page.locator("[data-slack-link-confirm]")
    identity = page.locator("[data-slack-identity]")
    for shown in ("U0CASEY (casey)", "T0ACME", approver.username):
        expect(identity).to_contain_text(shown)
    expect(confirm).to_contain_text("Continue only if you pressed a button in Slack")
    page.screenshot(path=str(SHOTS / "slack-link.png"), full_page=True)
    confirm.get_by_role("button", name="This is my Slack user: show the code").click()
    code = page.locator("[data-slack-link-code]")
    expect(code).to_have_text(re.compile(r"^[A-Z0-9]{4}-[A-Z0-9]{4}$"))
    expect(confirm).to_contain_text("Never give this code to anyone")
    expect(page.locator("[data-slack-identity]")).to_contain_text("U0CASEY")
    page.screenshot(path=str(SHOTS / "slack-link-code.png"), full_page=True)
    assert not SlackLink.objects.exists()  # proposed only
    typed = code.inner_text()
    proposal = slack_linking.proposal_for_code(tenant=acme, team_id="T0ACME", slack_user_id="U0CASEY", code=typed)
    slack_linking.confirm_slack_link(
        tenant=acme, team_id="T0ACME", slack_user_id="U0CASEY", proposal_id=proposal.pk, code=typed
    )
    page.goto(asgi_live_server.url + reverse("approvals:notification_preferences"))
    expect(page.locator('[data-tenant="acme"] [data-slack-link]')).to_contain_text("Linked to Slack user U0CASEY")
    assert SlackLink.objects.get().user == approver


def test_a_viewer_cannot_link_a_slack_account(asgi_live_server, login_as, viewer, acme):
    token = slack.link_token(tenant=acme, team_id="T0ACME", user_id="U0VIEW", username="vic")
    page = login_as(viewer)
    response = page.goto(asgi_live_server.url + reverse("approvals:slack_link", args=[token]))
    assert response.status == 403
    expect(page.get_by_role("button", name="This is my Slack user: show the code")).to_have_count(0)
    assert not SlackLink.objects.exists()


def test_an_admin_saves_the_slack_signing_secret_and_never_sees_it_again(
    asgi_live_server, login_as, tenant_admin, acme
):
    secret = "abcdef0123456789abcdef0123456789"
    page = login_as(tenant_admin)
    page.goto(asgi_live_server.url + reverse("approvals:notification_settings", args=["acme"]))
    expect(page.locator("[data-slack-state]")).to_contain_text("None saved")
    page.get_by_label("Slack signing secret").fill(secret)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("[data-slack-state]")).to_contain_text("Approve and Decline buttons")
    assert secret not in page.content()
    assert slack.signing_secret_of(acme) == secret and channels_of(acme).slack_interactive
