"""Linking a Slack user to an Airlock approver, tried as the people who would abuse it.

Signed in to the console, an approver only proposes a link: the page shows the Slack user, workspace
and console account it would tie, and a one-time code. The link holds once that same Slack user types
the code in Slack and then confirms the console account Airlock names there, both presses signed with
the tenant's signing secret. So an approver phished into opening someone else's link gives nothing
away, and a Slack user sees whose account they would decide as before agreeing."""

import json
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import notices, slack, slack_linking
from approvals.models import ApprovalStatus, SlackLink, SlackLinkProposal
from approvals.notifications import save_notification_channels
from console.models import Role
from tests.approvals.factories import open_request
from tests.approvals.receiver import Receiver
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SECRET = "0123456789abcdef0123456789abcdef"
GLOBEX_SECRET = "fedcba9876543210fedcba9876543210"
TEAM = "T0ACME"


@dataclass
class SlackUser:
    """One person at Slack's end: presses buttons on the messages Airlock sent them (each press posted to
    the tenant's actions URL, signed as Slack signs it) and reads Airlock's answers."""

    client: Client
    receiver: Receiver
    capture: object
    user_id: str
    name: str

    def send(self, action: dict, *, state=None, timestamp=None, tenant="acme", secret=SECRET):
        payload = {
            "type": "block_actions",
            "user": {"id": self.user_id, "username": self.name, "team_id": TEAM},
            "team": {"id": TEAM},
            "actions": [{"type": "button", "action_ts": f"{time.time():.6f}", **action}],
            "trigger_id": f"{time.time_ns()}.{self.user_id}",  # each press of Slack's is a new request
            "state": {"values": state or {}},
            "response_url": self.receiver.url,
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        timestamp = str(int(time.time()) if timestamp is None else timestamp)
        with self.capture(execute=True):
            return self.client.generic(
                "POST",
                reverse("slack:actions", args=[tenant]),
                body,
                content_type="application/x-www-form-urlencoded",
                HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp,
                HTTP_X_SLACK_SIGNATURE=slack.signature_of(secret=secret, timestamp=timestamp, body=body),
            )

    def last_answer(self) -> dict:
        return json.loads(self.receiver.requests[-1].body)

    def press_approve(self, approval) -> dict:
        assert self.send({"action_id": notices.SLACK_APPROVE, "value": str(approval.pk)}).status_code == 200
        return self.last_answer()

    def press(self, message: dict, label: str, *, typed: str = "", **how):
        """Press the button labelled `label` on `message`, with `typed` in the message's text box (Slack
        sends every input's state along with a button press)."""
        blocks = message["blocks"]
        buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"] if "action_id" in e]
        button = next(e for e in buttons if e["text"]["text"] == label)
        state = {
            b["block_id"]: {b["element"]["action_id"]: {"type": "plain_text_input", "value": typed}}
            for b in blocks
            if b["type"] == "input"
        }
        return self.send({"action_id": button["action_id"], "value": button.get("value", "")}, state=state, **how)


@pytest.fixture
def receiver(settings, acme):
    settings.AIRLOCK_SLACK_RESPONSE_HOSTS = ["127.0.0.1"]
    save_notification_channels(tenant=acme, user=None, webhook_url="", email_enabled=True, slack_signing_secret=SECRET)
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def slack_user(receiver, django_capture_on_commit_callbacks):
    def make(user_id: str, name: str) -> SlackUser:
        return SlackUser(Client(), receiver, django_capture_on_commit_callbacks, user_id, name)

    return make


def _token(tenant, user_id="U123", team_id=TEAM) -> str:
    return slack.link_token(tenant=tenant, team_id=team_id, user_id=user_id, username="casey")


def _url(token: str) -> str:
    return reverse("approvals:slack_link", args=[token])


def _link_path(answer: dict) -> str:
    """The console link in Airlock's answer to an unlinked press."""
    return urlsplit(re.search(r"<([^|>]+)\|", answer["text"]).group(1)).path


def _code_on(page) -> str:
    return re.search(r"data-slack-link-code[^>]*>\s*([A-Z0-9-]+)\s*<", page.content.decode()).group(1)


def _names_an_account(answer: dict) -> bool:
    """Whether Airlock's answer offers the button that confirms a console account."""
    return slack.LINK_CONFIRM in json.dumps(answer) or "Link me to" in answer["text"]


def _propose(client, user, path: str) -> str:
    """Sign in as `user`, confirm the console page, and read the code it shows."""
    client.force_login(user)
    page = client.post(path)
    assert page.status_code == 200
    return _code_on(page)


# --- the console proposes --------------------------------------------------------------------------


def test_the_console_shows_the_slack_identity_and_only_proposes(client, acme, approver):
    client.force_login(approver)
    url = _url(_token(acme))
    page = client.get(url)
    text = page.content.decode()
    assert page.status_code == 200 and "U123" in text and "casey" in text and TEAM in text and "approver" in text
    assert "data-slack-link-code" not in text  # nothing is proposed by opening the page
    page = client.post(url)
    assert page.status_code == 200 and "U123" in page.content.decode() and _code_on(page)
    assert not SlackLink.objects.exists()
    proposal = SlackLinkProposal.objects.get()
    assert (proposal.user, proposal.slack_team_id, proposal.slack_user_id) == (approver, TEAM, "U123")
    stored = json.dumps(list(SlackLinkProposal.objects.values()), default=str).upper()
    assert slack_linking.normalized(_code_on(page)) not in stored  # the code is kept as a salted hash only


def test_a_viewer_is_refused_and_another_tenants_member_sees_nothing(client, acme, viewer, outsider):
    url = _url(_token(acme))
    client.force_login(viewer)
    assert client.post(url).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code == 404 and client.post(url).status_code == 404
    assert not SlackLinkProposal.objects.exists()


def test_signed_out_the_link_asks_to_sign_in(client, acme):
    response = client.post(_url(_token(acme)))
    assert response.status_code == 302 and response["Location"].startswith(reverse("console:login"))
    assert not SlackLinkProposal.objects.exists()


def test_a_forged_or_old_token_is_refused(client, acme, approver, monkeypatch):
    client.force_login(approver)
    forged = signing.dumps({"t": acme.pk, "team": TEAM, "user": "U666"}, salt="another-salt")
    response = client.post(_url(forged))
    assert response.status_code == 400 and b"not one Airlock made" in response.content
    made_at = time.time() - slack.LINK_MAX_AGE_SECONDS - 60
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: made_at)
        old = _token(acme)
    response = client.post(_url(old))
    assert response.status_code == 400 and b"older than ten minutes" in response.content
    assert not SlackLinkProposal.objects.exists()


def test_a_slack_user_already_linked_to_someone_else_cannot_be_proposed(client, acme, approver, second_approver):
    SlackLink.objects.create(tenant=acme, user=approver, slack_team_id=TEAM, slack_user_id="U123")
    client.force_login(second_approver)
    response = client.post(_url(_token(acme)))
    assert response.status_code == 400 and b"linked to another Airlock account" in response.content
    assert not SlackLinkProposal.objects.exists()


def test_a_second_slack_user_needs_an_unlink_first(client, acme, approver):
    SlackLink.objects.create(tenant=acme, user=approver, slack_team_id=TEAM, slack_user_id="U123")
    client.force_login(approver)
    response = client.post(_url(_token(acme, user_id="U456")))
    assert response.status_code == 400 and b"unlink it first" in response.content
    assert client.post(reverse("approvals:slack_unlink", args=["acme"])).status_code == 302
    assert not SlackLink.objects.exists()
    assert client.post(_url(_token(acme, user_id="U456"))).status_code == 200
    assert SlackLinkProposal.objects.get().slack_user_id == "U456"


def test_unlinking_needs_the_role_and_the_tenant(client, acme, approver, viewer, outsider):
    SlackLink.objects.create(tenant=acme, user=approver, slack_team_id=TEAM, slack_user_id="U123")
    for who, status in ((viewer, 403), (outsider, 404)):
        client.force_login(who)
        assert client.post(reverse("approvals:slack_unlink", args=["acme"])).status_code == status
    assert SlackLink.objects.filter(user=approver).exists()


# --- Slack confirms ------------------------------------------------------------------------------


def test_press_propose_type_the_code_confirm_then_a_press_decides(client, acme, agent, approver, slack_user):
    """The flow an approver meets: an unlinked press answers with a console link and a code box; the
    console shows the code; typed in Slack, Airlock names the account; confirmed, the next press approves."""
    approval = open_request(tenant=acme, agent=agent)
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(approval)
    assert answer["response_type"] == "ephemeral" and "not linked" in answer["text"]
    code = _propose(client, approver, _link_path(answer))
    assert casey.press(answer, "Check the code", typed=code.lower()).status_code == 200
    named = casey.last_answer()
    assert _names_an_account(named) and "approver" in named["text"] and "U777" in named["text"]
    assert not SlackLink.objects.exists()
    assert casey.press(named, "Link me to approver").status_code == 200
    assert "now decides as approver" in casey.last_answer()["text"]
    link = SlackLink.objects.get()
    assert (link.tenant, link.user, link.slack_team_id, link.slack_user_id) == (acme, approver, TEAM, "U777")
    assert b"Linked to Slack user" in client.get(reverse("approvals:notification_preferences")).content
    assert casey.press_approve(approval)["replace_original"] is True
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.decided_by == approver


def test_an_approver_phished_into_confirming_anothers_link_gives_nothing_away(
    client, acme, agent, approver, slack_user
):
    """Mallory, a member of the workspace, presses a button, sends the approver her link ("please
    confirm this"), and the approver signs in and confirms. Mallory still cannot decide as the approver:
    the code is on the approver's screen, and nothing she can send from Slack links without it."""
    approval = open_request(tenant=acme, agent=agent)
    mallory = slack_user("U0MALLORY", "mallory")
    answer = mallory.press_approve(approval)
    client.force_login(approver)
    client.get(_link_path(answer))
    client.post(_link_path(answer))
    assert not SlackLink.objects.exists()
    assert "not linked" in mallory.press_approve(approval)["text"]
    for guess in ("", "AAAA-AAAA", "0000-0000", "1234"):
        assert mallory.press(answer, "Check the code", typed=guess).status_code == 200
        assert not _names_an_account(mallory.last_answer()) and "approver" not in mallory.last_answer()["text"]
    forged_confirm = {"action_id": slack.LINK_CONFIRM, "value": str(SlackLinkProposal.objects.get().pk)}
    assert mallory.send(forged_confirm).status_code == 200
    assert "nothing was linked" in mallory.last_answer()["text"].lower()
    assert not SlackLink.objects.exists()
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING and approval.decided_by is None


def test_the_slack_user_sees_which_console_account_before_it_binds(client, acme, second_approver, slack_user, agent):
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, second_approver, _link_path(answer))
    casey.press(answer, "Check the code", typed=code)
    named = casey.last_answer()
    assert named["response_type"] == "ephemeral" and _names_an_account(named)
    assert "approver2" in named["text"] and "Acme Corp" in named["text"] and "only if that is your own" in named["text"]
    assert not SlackLink.objects.exists()  # only the next press, on the named account, links
    casey.press(named, "Link me to approver2")
    assert SlackLink.objects.get().user == second_approver


def test_someone_elses_code_does_not_link_another_slack_user(client, acme, approver, slack_user, agent):
    """The code proves the console to one Slack user: typed by another Slack user, it links nobody."""
    approval = open_request(tenant=acme, agent=agent)
    casey, mallory = slack_user("U777", "casey"), slack_user("U0MALLORY", "mallory")
    code = _propose(client, approver, _link_path(casey.press_approve(approval)))
    mallory_answer = mallory.press_approve(approval)
    mallory.press(mallory_answer, "Check the code", typed=code)
    assert not _names_an_account(mallory.last_answer()) and not SlackLink.objects.exists()


def test_a_stale_proposal_cannot_be_confirmed(client, acme, agent, approver, slack_user):
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, approver, _link_path(answer))
    casey.press(answer, "Check the code", typed=code)
    named = casey.last_answer()
    SlackLinkProposal.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    casey.press(named, "Link me to approver")
    assert "nothing was linked" in casey.last_answer()["text"].lower()
    casey.press(answer, "Check the code", typed=code)
    assert not _names_an_account(casey.last_answer())
    assert not SlackLink.objects.exists()


def test_a_used_confirmation_cannot_link_again(client, acme, agent, approver, slack_user):
    """Linked, then unlinked in the console: pressing the old confirmation again (a new signed request,
    not a replay) or typing the old code again links nothing."""
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, approver, _link_path(answer))
    casey.press(answer, "Check the code", typed=code)
    named = casey.last_answer()
    casey.press(named, "Link me to approver")
    assert SlackLink.objects.filter(user=approver).exists()
    assert client.post(reverse("approvals:slack_unlink", args=["acme"])).status_code == 302
    assert casey.press(named, "Link me to approver", timestamp=int(time.time()) - 1).status_code == 200
    assert "nothing was linked" in casey.last_answer()["text"].lower()
    casey.press(answer, "Check the code", typed=code, timestamp=int(time.time()) - 2)
    assert not _names_an_account(casey.last_answer())
    assert not SlackLink.objects.exists()


def test_wrong_codes_use_up_the_proposal(client, acme, agent, approver, slack_user):
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, approver, _link_path(answer))
    for attempt in range(slack_linking.MAX_CODE_ATTEMPTS):
        casey.press(answer, "Check the code", typed=f"WRONG{attempt}", timestamp=int(time.time()) - attempt)
    casey.press(answer, "Check the code", typed=code)
    assert not _names_an_account(casey.last_answer()) and not SlackLink.objects.exists()


def test_another_tenants_signing_secret_links_nothing(client, acme, globex, agent, approver, slack_user):
    """Globex's Slack app (its own secret, its own URL) cannot confirm a proposal made in acme, and its
    secret does not sign for acme's URL."""
    save_notification_channels(
        tenant=globex, user=None, webhook_url="", email_enabled=True, slack_signing_secret=GLOBEX_SECRET
    )
    casey = slack_user("U777", "casey")
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, approver, _link_path(answer))
    refused = casey.press(answer, "Check the code", typed=code, secret=GLOBEX_SECRET)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "bad_signature"
    assert casey.press(answer, "Check the code", typed=code, tenant="globex", secret=GLOBEX_SECRET).status_code == 200
    assert not _names_an_account(casey.last_answer())
    proposal = SlackLinkProposal.objects.get()
    confirm = {"action_id": slack.LINK_CONFIRM, "value": f"{proposal.pk}:{code}"}
    assert casey.send(confirm, tenant="globex", secret=GLOBEX_SECRET).status_code == 200
    assert "nothing was linked" in casey.last_answer()["text"].lower()
    assert casey.send(confirm, secret=GLOBEX_SECRET).status_code == 401
    assert not SlackLink.objects.exists()


def test_an_approver_who_lost_the_role_before_slack_confirms_is_not_linked(client, acme, agent, slack_user):
    casey = slack_user("U777", "casey")
    alice = make_user("alice", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])
    answer = casey.press_approve(open_request(tenant=acme, agent=agent))
    code = _propose(client, alice, _link_path(answer))
    casey.press(answer, "Check the code", typed=code)
    named = casey.last_answer()
    alice.memberships.filter(tenant=acme, role=Role.APPROVER).delete()
    casey.press(named, "Link me to alice")
    assert "nothing was linked" in casey.last_answer()["text"].lower() and not SlackLink.objects.exists()
