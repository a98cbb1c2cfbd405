"""Linking a Slack user to an Airlock approver: only the signed-in approver's POST links, the link
token is signed and short-lived, and nobody else (a viewer, another tenant, a second claimant of the
same Slack user) can make or take a link. Then the whole loop: press, link, press again, decided."""

import json
import time
from urllib.parse import urlencode

import pytest
from django.core import signing
from django.urls import reverse

from approvals import notices, slack
from approvals.models import ApprovalStatus, SlackLink
from approvals.notifications import save_notification_channels
from tests.approvals.factories import open_request
from tests.approvals.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "0123456789abcdef0123456789abcdef"


def _token(tenant, user_id="U123", team_id="T0ACME") -> str:
    return slack.link_token(tenant=tenant, team_id=team_id, user_id=user_id, username="casey")


def _url(token: str) -> str:
    return reverse("approvals:slack_link", args=[token])


def test_the_approver_sees_who_they_link_and_only_the_post_links(client, acme, approver):
    client.force_login(approver)
    url = _url(_token(acme))
    page = client.get(url)
    assert page.status_code == 200 and b"U123" in page.content and b"T0ACME" in page.content
    assert not SlackLink.objects.exists()
    response = client.post(url)
    assert response.status_code == 302 and response["Location"] == reverse("approvals:notification_preferences")
    link = SlackLink.objects.get()
    assert (link.tenant, link.user, link.slack_team_id, link.slack_user_id) == (acme, approver, "T0ACME", "U123")
    assert b"Linked to Slack user" in client.get(reverse("approvals:notification_preferences")).content


def test_a_viewer_is_refused_and_another_tenants_member_sees_nothing(client, acme, viewer, outsider):
    url = _url(_token(acme))
    client.force_login(viewer)
    assert client.post(url).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code == 404 and client.post(url).status_code == 404
    assert not SlackLink.objects.exists()


def test_signed_out_the_link_asks_to_sign_in(client, acme):
    response = client.post(_url(_token(acme)))
    assert response.status_code == 302 and response["Location"].startswith(reverse("console:login"))
    assert not SlackLink.objects.exists()


def test_a_forged_or_old_token_is_refused(client, acme, approver, monkeypatch):
    client.force_login(approver)
    forged = signing.dumps({"t": acme.pk, "team": "T0ACME", "user": "U666"}, salt="another-salt")
    response = client.post(_url(forged))
    assert response.status_code == 400 and b"not one Airlock made" in response.content
    made_at = time.time() - slack.LINK_MAX_AGE_SECONDS - 60
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: made_at)
        old = _token(acme)
    response = client.post(_url(old))
    assert response.status_code == 400 and b"older than ten minutes" in response.content
    assert not SlackLink.objects.exists()


def test_a_slack_user_already_linked_to_someone_else_cannot_be_taken(client, acme, approver, second_approver):
    client.force_login(approver)
    client.post(_url(_token(acme)))
    client.force_login(second_approver)
    response = client.post(_url(_token(acme)))
    assert response.status_code == 400 and b"linked to another Airlock account" in response.content
    assert SlackLink.objects.get().user == approver


def test_a_second_slack_user_needs_an_unlink_first(client, acme, approver):
    client.force_login(approver)
    client.post(_url(_token(acme)))
    response = client.post(_url(_token(acme, user_id="U456")))
    assert response.status_code == 400 and b"unlink it first" in response.content
    assert client.post(reverse("approvals:slack_unlink", args=["acme"])).status_code == 302
    assert not SlackLink.objects.exists()
    assert client.post(_url(_token(acme, user_id="U456"))).status_code == 302
    assert SlackLink.objects.get().slack_user_id == "U456"


def test_unlinking_needs_the_role_and_the_tenant(client, acme, approver, viewer, outsider):
    client.force_login(approver)
    client.post(_url(_token(acme)))
    for who, status in ((viewer, 403), (outsider, 404)):
        client.force_login(who)
        assert client.post(reverse("approvals:slack_unlink", args=["acme"])).status_code == status
    assert SlackLink.objects.filter(user=approver).exists()


def test_press_link_press_again_decides(client, settings, acme, agent, approver, django_capture_on_commit_callbacks):
    """The flow an approver meets: an unlinked press answers with a link; confirmed in the console,
    the next press approves."""
    settings.AIRLOCK_SLACK_RESPONSE_HOSTS = ["127.0.0.1"]
    save_notification_channels(tenant=acme, user=None, webhook_url="", email_enabled=True, slack_signing_secret=SECRET)
    approval = open_request(tenant=acme, agent=agent)
    receiver = Receiver().start()
    try:
        payload = {
            "type": "block_actions",
            "user": {"id": "U777", "username": "casey"},
            "team": {"id": "T0ACME"},
            "actions": [{"action_id": notices.SLACK_APPROVE, "value": str(approval.pk)}],
            "response_url": receiver.url,
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()

        def press(timestamp: str):
            signature = slack.signature_of(secret=SECRET, timestamp=timestamp, body=body)
            return client.generic(
                "POST",
                reverse("slack:actions", args=["acme"]),
                body,
                content_type="application/x-www-form-urlencoded",
                HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp,
                HTTP_X_SLACK_SIGNATURE=signature,
            )

        with django_capture_on_commit_callbacks(execute=True):
            assert press(str(int(time.time()) - 1)).status_code == 200
        answer = json.loads(receiver.requests[0].body)["text"]
        path = "/approvals/slack/link/" + answer.split("/approvals/slack/link/")[1].split("|")[0]
        client.force_login(approver)
        assert client.post(path).status_code == 302
        with django_capture_on_commit_callbacks(execute=True):
            assert press(str(int(time.time()))).status_code == 200
    finally:
        receiver.stop()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.decided_by == approver
    assert json.loads(receiver.requests[1].body)["replace_original"] is True
