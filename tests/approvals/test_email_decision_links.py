"""Deciding from an e-mail's link, tried by its recipient and by everyone who must not: the link
in the e-mail really sent, a GET that must change nothing, another person, a spent, forged or
expired link, and a recipient the inbox would now refuse."""

import re
import time

import pytest
from django.conf import settings as django_settings
from django.core import mail, signing
from django.urls import reverse

from approvals import decision_links
from approvals.models import ApprovalNotice, ApprovalStatus, NotifyMode
from console.models import Membership, Role
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db

LINK = re.compile(r"Approve or decline \(you confirm in the console\): http://[^/]+(/approvals/email/[^/]+/)")


@pytest.fixture
def mailed(acme, agent, approver, django_capture_on_commit_callbacks):
    """A new request, announced the real way: the approver's e-mail and the path of its link."""
    with django_capture_on_commit_callbacks(execute=True):
        approval = open_request(tenant=acme, agent=agent)
    [message] = [m for m in mail.outbox if approver.email in m.to]
    return approval, LINK.search(message.body).group(1)


def _unchanged(approval) -> bool:
    approval.refresh_from_db()
    return approval.status == ApprovalStatus.PENDING and not approval.events.exclude(action="requested").exists()


def test_the_recipients_get_shows_the_request_and_decides_nothing(client, approver, mailed):
    approval, path = mailed
    client.force_login(approver)
    response = client.get(path)
    assert response.status_code == 200
    assert b"data-email-decision" in response.content and approval.skill_name.encode() in response.content
    assert _unchanged(approval)
    assert ApprovalNotice.objects.get(approval=approval, user=approver).link_used_at is None


def test_the_recipients_post_approves_once_and_spends_the_link(
    client, approver, mailed, executions, django_capture_on_commit_callbacks
):
    approval, path = mailed
    client.force_login(approver)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(path, {"decision": "approve"})
    assert response.status_code == 302 and response["Location"] == reverse("approvals:detail", args=[approval.pk])
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.decided_via == "email"
    assert len(executions) == 1
    again = client.post(path, {"decision": "decline", "reason": "changed my mind"})
    assert again.status_code == 400 and b"already used" in again.content
    assert approval.events.filter(action="declined").count() == 0
    assert b"data-link-used" in client.get(path).content


def test_a_decline_needs_a_reason_and_leaves_the_link_usable(client, approver, mailed):
    approval, path = mailed
    client.force_login(approver)
    response = client.post(path, {"decision": "decline", "reason": ""})
    assert response.status_code == 400 and b"Say why you decline" in response.content
    assert _unchanged(approval)
    assert client.post(path, {"decision": "decline", "reason": "wrong order"}).status_code == 302
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DECLINED and approval.decline_reason == "wrong order"


@pytest.mark.parametrize("who", ["second_approver", "outsider", "viewer"])
def test_someone_else_with_the_link_is_refused(who, request, client, mailed):
    """A forwarded e-mail: another approver of the tenant, another tenant's member, a viewer."""
    approval, path = mailed
    client.force_login(request.getfixturevalue(who))
    for response in (client.get(path), client.post(path, {"decision": "approve"})):
        assert response.status_code == 403 and b"sent to another account" in response.content
        assert b"tok_live_secret" not in response.content
    assert _unchanged(approval)


def test_signed_out_the_link_asks_to_sign_in_first(client, mailed):
    approval, path = mailed
    response = client.post(path, {"decision": "approve"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("console:login"))
    assert _unchanged(approval)


def test_a_recipient_no_longer_an_approver_is_refused_by_the_inbox_rule(client, acme, approver, mailed):
    approval, path = mailed
    Membership.objects.filter(tenant=acme, user=approver, role=Role.APPROVER).delete()
    Membership.objects.get_or_create(tenant=acme, user=approver, role=Role.VIEWER)
    client.force_login(approver)
    response = client.post(path, {"decision": "approve"})
    assert response.status_code == 403 and b"approver role" in response.content
    assert _unchanged(approval)


def test_a_request_decided_in_the_inbox_first_is_shown_decided(client, approver, second_approver, mailed):
    from approvals.services import decide_approval

    approval, path = mailed
    decide_approval(approval=approval, user=second_approver, decision="decline", reason="duplicate")
    client.force_login(approver)
    response = client.post(path, {"decision": "approve"})
    assert response.status_code == 409 and b"already declined by approver2" in response.content


def test_a_forged_or_tampered_link_is_refused(client, approver, mailed):
    approval, path = mailed
    client.force_login(approver)
    token = path.split("/")[-2]
    for bad in ("not-a-token", token[:-2] + ("AA" if not token.endswith("AA") else "BB")):
        response = client.post(reverse("approvals:email_decision", args=[bad]), {"decision": "approve"})
        assert response.status_code == 400 and b"not one Airlock sent" in response.content
    assert _unchanged(approval)


def test_an_expired_link_is_refused(client, acme, approver, agent, monkeypatch):
    approval = open_request(tenant=acme, agent=agent)
    notice = ApprovalNotice.objects.create(tenant=acme, approval=approval, user=approver, mode=NotifyMode.IMMEDIATELY)
    made_at = time.time() - (django_settings.AIRLOCK_EMAIL_LINK_MAX_AGE_HOURS * 3600 + 60)
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: made_at)
        token = decision_links.token_of(notice)
    client.force_login(approver)
    response = client.post(reverse("approvals:email_decision", args=[token]), {"decision": "approve"})
    assert response.status_code == 400 and b"expired" in response.content
    assert _unchanged(approval)


def test_a_digest_carries_one_link_per_request(acme, agent, approver, django_capture_on_commit_callbacks):
    from approvals.notifications import save_notification_preference, send_digest

    preference = save_notification_preference(tenant=acme, user=approver, mode=NotifyMode.DIGEST, digest_minutes=5)
    with django_capture_on_commit_callbacks(execute=True):
        open_request(tenant=acme, agent=agent)
        open_request(tenant=acme, agent=agent)
    from django.utils import timezone

    mail.outbox.clear()
    assert send_digest(preference=preference, now=timezone.now()) == 2
    [digest] = mail.outbox
    links = LINK.findall(digest.body)
    assert len(links) == 2 and len(set(links)) == 2
