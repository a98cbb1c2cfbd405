"""Deciding from Slack, tried as Slack and as people trying to break it: the actions endpoint driven
with requests signed like Slack signs them (and forged, replayed, stale ones), the answers posted to
a real local HTTP server standing in for the interaction's response_url."""

import json
import time
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from approvals import notices, slack
from approvals.models import ApprovalEvent, ApprovalStatus, SlackLink
from approvals.notifications import save_notification_channels
from console.models import Role
from tests.approvals.factories import open_request
from tests.approvals.receiver import Receiver
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0ACME"


@pytest.fixture
def receiver(settings):
    settings.AIRLOCK_SLACK_RESPONSE_HOSTS = ["127.0.0.1"]
    server = Receiver().start()
    yield server
    server.stop()


def _slack_on(tenant):
    return save_notification_channels(
        tenant=tenant, user=None, webhook_url="", email_enabled=True, slack_signing_secret=SECRET
    )


@pytest.fixture
def slack_on(acme):
    return _slack_on(acme)


def _link(tenant, user, slack_user: str) -> SlackLink:
    return SlackLink.objects.create(tenant=tenant, user=user, slack_team_id=TEAM, slack_user_id=slack_user)


def _body(approval_id, *, slack_user: str, response_url: str, action=notices.SLACK_APPROVE, reason="") -> bytes:
    payload = {
        "type": "block_actions",
        "user": {"id": slack_user, "username": f"{slack_user.lower()}-name", "team_id": TEAM},
        "team": {"id": TEAM},
        "actions": [{"action_id": action, "value": str(approval_id), "type": "button"}],
        "state": {"values": {notices.SLACK_REASON_BLOCK: {notices.SLACK_REASON_INPUT: {"value": reason}}}},
        "response_url": response_url,
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def _post(client, body: bytes, *, tenant="acme", secret=SECRET, timestamp=None, signature=None):
    timestamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = signature or slack.signature_of(secret=secret, timestamp=timestamp, body=body)
    return client.generic(
        "POST",
        reverse("slack:actions", args=[tenant]),
        body,
        content_type="application/x-www-form-urlencoded",
        HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp,
        HTTP_X_SLACK_SIGNATURE=signature,
    )


def _answers(receiver) -> list[dict]:
    return [json.loads(r.body) for r in receiver.requests]


def _unchanged(approval) -> bool:
    approval.refresh_from_db()
    return approval.status == ApprovalStatus.PENDING and not approval.events.exclude(action="requested").exists()


def test_a_signed_click_approves_once_and_updates_the_message(
    client, acme, agent, approver, slack_on, receiver, executions, django_capture_on_commit_callbacks
):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    body = _body(approval.pk, slack_user="U111", response_url=receiver.url)
    timestamp = int(time.time())
    with django_capture_on_commit_callbacks(execute=True):
        first = _post(client, body, timestamp=timestamp)
        second = _post(client, body, timestamp=timestamp)  # Slack delivering the same click twice
    assert first.status_code == 200
    assert second.status_code == 409 and second.json()["error"]["code"] == "replayed"
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.decided_by == approver
    assert approval.decided_via == "slack" and len(executions) == 1
    assert ApprovalEvent.objects.filter(request=approval, action="approved").count() == 1
    [answer] = _answers(receiver)
    assert answer["replace_original"] is True and "approved by approver via slack" in answer["text"]
    assert "actions" not in json.dumps(answer["blocks"])  # the buttons are gone


def test_a_second_click_after_the_decision_shows_the_outcome_and_changes_nothing(
    client, acme, agent, approver, second_approver, slack_on, receiver, django_capture_on_commit_callbacks
):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    _link(acme, second_approver, "U222")
    with django_capture_on_commit_callbacks(execute=True):
        _post(client, _body(approval.pk, slack_user="U111", response_url=receiver.url))
        later = _body(approval.pk, slack_user="U222", response_url=receiver.url, action=notices.SLACK_DECLINE)
        assert _post(client, later).status_code == 200
    approval.refresh_from_db()
    assert approval.decided_by == approver and approval.events.filter(action="declined").count() == 0
    assert "approved by approver" in _answers(receiver)[1]["text"]


def test_a_decline_needs_the_typed_reason(
    client, acme, agent, approver, slack_on, receiver, django_capture_on_commit_callbacks
):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    with django_capture_on_commit_callbacks(execute=True):
        _post(client, _body(approval.pk, slack_user="U111", response_url=receiver.url, action=notices.SLACK_DECLINE))
    assert _unchanged(approval)
    [answer] = _answers(receiver)
    assert answer["response_type"] == "ephemeral" and answer["replace_original"] is False
    assert "Say why you decline" in answer["text"]
    with django_capture_on_commit_callbacks(execute=True):
        body = _body(
            approval.pk, slack_user="U111", response_url=receiver.url, action=notices.SLACK_DECLINE, reason="wrong card"
        )
        _post(client, body)
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.DECLINED and approval.decline_reason == "wrong card"


@pytest.mark.parametrize(
    ("how", "code", "status"),
    [
        ("forged", "bad_signature", 401),
        ("wrong_secret", "bad_signature", 401),
        ("stale", "stale_request", 401),
        ("future", "stale_request", 401),
        ("unsigned", "bad_signature", 401),
    ],
)
def test_forged_and_stale_requests_change_nothing(how, code, status, client, acme, agent, approver, slack_on, receiver):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    body = _body(approval.pk, slack_user="U111", response_url=receiver.url)
    now = int(time.time())
    kwargs = {
        "forged": {"signature": "v0=" + "0" * 64},
        "wrong_secret": {"secret": "another-apps-secret-0000000000000"},
        "stale": {"timestamp": now - 6 * 60},  # signed correctly, six minutes old
        "future": {"timestamp": now + 6 * 60},
        "unsigned": {"signature": " "},
    }[how]
    response = _post(client, body, **kwargs)
    assert response.status_code == status and response.json()["error"]["code"] == code
    assert _unchanged(approval) and receiver.requests == []


def test_a_body_changed_after_signing_is_refused(client, acme, agent, approver, slack_on, receiver):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    signed = _body(approval.pk, slack_user="U111", response_url=receiver.url, action=notices.SLACK_DECLINE)
    timestamp = str(int(time.time()))
    signature = slack.signature_of(secret=SECRET, timestamp=timestamp, body=signed)
    tampered = _body(approval.pk, slack_user="U111", response_url=receiver.url)
    response = _post(client, tampered, timestamp=timestamp, signature=signature)
    assert response.status_code == 401 and _unchanged(approval)


def test_a_replay_a_minute_later_is_refused(client, acme, agent, approver, slack_on, receiver):
    """An attacker who captured a signed click replays it within the window: still one decision."""
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    body = _body(approval.pk, slack_user="U111", response_url=receiver.url, action=notices.SLACK_DECLINE, reason="no")
    timestamp = int(time.time()) - 60
    assert _post(client, body, timestamp=timestamp).status_code == 200
    replay = _post(client, body, timestamp=timestamp)
    assert replay.status_code == 409
    assert ApprovalEvent.objects.filter(request=approval, action="declined").count() == 1


def test_a_tenant_without_a_signing_secret_and_an_unknown_tenant_refuse_everything(
    client, acme, globex, agent, approver, receiver
):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    body = _body(approval.pk, slack_user="U111", response_url=receiver.url)
    assert _post(client, body).status_code == 401  # acme has not saved a secret
    assert _post(client, body, tenant="no-such-tenant").status_code == 401
    assert _unchanged(approval)


def test_another_tenants_slack_app_cannot_decide_acme_requests(
    client, acme, globex, agent, receiver, django_capture_on_commit_callbacks
):
    """Globex's admin sets up globex's Slack app, links globex's approver, and presses a button
    carrying an acme request's id: globex's URL and secret reach only globex's requests."""
    approval = open_request(tenant=acme, agent=agent)
    _slack_on(globex)
    globex_approver = make_user("globex-approver", tenant=globex, roles=[Role.APPROVER])
    _link(globex, globex_approver, "U999")
    body = _body(approval.pk, slack_user="U999", response_url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, body, tenant="globex").status_code == 200
        assert _post(client, body, tenant="acme").status_code == 401  # globex's secret is not acme's
    assert _unchanged(approval)
    assert "no such request" in _answers(receiver)[0]["text"]


def test_an_unlinked_slack_user_is_told_how_to_link_and_decides_nothing(
    client, acme, agent, approver, slack_on, receiver, django_capture_on_commit_callbacks
):
    approval = open_request(tenant=acme, agent=agent)
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, _body(approval.pk, slack_user="U404", response_url=receiver.url)).status_code == 200
    assert _unchanged(approval)
    [answer] = _answers(receiver)
    assert answer["response_type"] == "ephemeral" and "not linked" in answer["text"]
    token = answer["text"].split("/approvals/slack/link/")[1].split("/")[0]
    assert slack.read_link_token(token) == {"t": acme.pk, "team": TEAM, "user": "U404", "name": "u404-name"}


@pytest.mark.parametrize("who", ["viewer", "self", "inactive"])
def test_a_linked_user_the_inbox_would_refuse_decides_nothing(
    who, client, acme, agent, approver, viewer, slack_on, receiver, django_capture_on_commit_callbacks
):
    if who == "self":  # the run acts for the approver: they may not approve it themselves
        approval, user = open_request(tenant=acme, agent=agent, end_user=approver.username), approver
    else:
        approval, user = open_request(tenant=acme, agent=agent), viewer if who == "viewer" else approver
    if who == "inactive":
        user.is_active = False
        user.save()
    _link(acme, user, "U555")
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, _body(approval.pk, slack_user="U555", response_url=receiver.url)).status_code == 200
    assert _unchanged(approval)
    [answer] = _answers(receiver)
    assert answer["response_type"] == "ephemeral"
    expected = {
        "viewer": "You need the approver role in acme",
        "self": "acts on your own behalf",
        "inactive": "not linked",
    }[who]
    assert expected in answer["text"]


def test_a_two_person_request_needs_two_linked_approvers(
    client, acme, agent, approver, second_approver, slack_on, receiver, django_capture_on_commit_callbacks
):
    from approvals.models import ApprovalRequest

    approval = open_request(tenant=acme, agent=agent)
    ApprovalRequest.objects.filter(pk=approval.pk).update(required_approvals=2, approval_mode="two_person")
    _link(acme, approver, "U111")
    _link(acme, second_approver, "U222")
    with django_capture_on_commit_callbacks(execute=True):
        press = _body(approval.pk, slack_user="U111", response_url=receiver.url)
        _post(client, press)
        _post(client, press, timestamp=int(time.time()) - 1)  # a second press: a new signed request
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING and approval.votes.count() == 1
    first, again = _answers(receiver)
    assert "1 of 2" in first["text"] and "You already approved this" in again["text"]
    with django_capture_on_commit_callbacks(execute=True):
        _post(client, _body(approval.pk, slack_user="U222", response_url=receiver.url))
    approval.refresh_from_db()
    assert approval.decided_by == second_approver and approval.votes.count() == 2


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"payload=not-json",
        b"payload=%7B%7D",
        urlencode({"payload": json.dumps({"type": "view_submission"})}).encode(),
        _body(1, slack_user="U" * 40, response_url="https://hooks.slack.com/x"),
        _body(1, slack_user="u1'; drop", response_url="https://hooks.slack.com/x"),
    ],
)
def test_malformed_payloads_are_a_clear_400(payload, client, acme, slack_on):
    response = _post(client, payload)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_payload"


def test_a_signed_payload_nested_five_thousand_deep_is_a_clear_400(client, acme, slack_on):
    """Whoever holds the signing secret (or Slack relaying a crafted value) cannot crash the endpoint
    with a deeply nested document: it is refused as malformed, never parsed into a RecursionError."""
    nested = '{"type": "block_actions", "actions": ' + "[" * 5000 + "]" * 5000 + "}"
    response = _post(client, urlencode({"payload": nested}).encode())
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_payload"
    assert "nested too deeply" in response.json()["error"]["message"]


def test_a_response_url_off_slack_is_refused_before_anything_is_decided(client, acme, agent, approver, slack_on):
    approval = open_request(tenant=acme, agent=agent)
    _link(acme, approver, "U111")
    response = _post(client, _body(approval.pk, slack_user="U111", response_url="https://attacker.example/x"))
    assert response.status_code == 400 and "response_url" in response.json()["error"]["message"]
    assert _unchanged(approval)


def test_the_message_carries_buttons_but_never_a_confidential_skills_arguments(acme, agent, slack_on):
    approval = open_request(tenant=acme, agent=agent)
    approval.action = {**approval.action, "data_classification": "confidential"}
    message = json.loads(notices.slack_body(notices.notice_of(approval), interactive=True))
    values = [e.get("value") for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert values == [str(approval.pk), str(approval.pk), None]
    assert "tok_live_secret" not in json.dumps(message) and notices.WITHHELD in json.dumps(message)


def test_the_signing_secret_is_sealed_at_rest(acme, slack_on):
    slack_on.refresh_from_db()
    assert SECRET not in slack_on.sealed_slack_signing_secret and slack.signing_secret_of(acme) == SECRET


def test_a_click_on_an_expired_request_decides_nothing_and_shows_it_expired(
    client, acme, agent, approver, slack_on, receiver, executions, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.models import ApprovalRequest

    approval = open_request(tenant=acme, agent=agent)
    ApprovalRequest.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    _link(acme, approver, "U111")
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, _body(approval.pk, slack_user="U111", response_url=receiver.url)).status_code == 200
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXPIRED and approval.decided_by is None and executions == []
    [answer] = _answers(receiver)
    assert answer["replace_original"] is True and "expired" in answer["text"]
