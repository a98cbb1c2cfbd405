"""Deciding from Slack: verify a button click as Slack signs it, find the Airlock user the Slack user
is linked to, decide through `services.decide_approval` (every rule of the inbox), and answer on the
interaction's response_url.

A click changes something only when it is signed with the tenant's Slack signing secret
(`v0=` + HMAC-SHA256 of `v0:{timestamp}:{raw body}`), its timestamp is within five minutes of ours,
the same signed request was not seen before, and its Slack user is linked (`SlackLink`). The button
carries the request's id only; what the message says comes from `approvals.notices`, which withholds a
confidential skill's arguments.

An unlinked Slack user is answered with a console link and a box for the code the console shows; the
link is made only when that Slack user, from Slack, types the code and confirms the console account
Airlock names (approvals.slack_linking), so opening someone else's link in the console links nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction

from approvals import notices, services, slack_linking, tasks
from approvals.models import ApprovalRequest, SlackLink, TenantNotificationSettings
from console.models import Tenant
from lib import bounded_json, egress
from lib.public_url import public_reverse
from lib.sealing import unseal

logger = logging.getLogger(__name__)

REPLAY_WINDOW_SECONDS = 5 * 60
SLACK_ID = re.compile(r"[A-Z0-9]{1,32}")
LINK_SALT = "airlock.approvals.slack-link"
LINK_MAX_AGE_SECONDS = 10 * 60
REASON_HINT = " Type the reason in the box above the buttons, then press Decline."
DECISIONS = {notices.SLACK_APPROVE: "approve", notices.SLACK_DECLINE: "decline"}
# The interactive parts of the answer to an unlinked press: a box for the console's code, a button that
# checks it, and on the answer to that a button that confirms the account Airlock names.
LINK_CODE_BLOCK = "airlock_link_code"
LINK_CODE_INPUT = "code"
LINK_CHECK = "airlock_link_check"
LINK_CONFIRM = "airlock_link_confirm"
ACTIONS = {**DECISIONS, LINK_CHECK: "link_check", LINK_CONFIRM: "link_confirm"}


class SlackRefused(Exception):
    """The request is not a click Airlock acts on; nothing changed. `code` and `status` go in the answer."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def signature_of(*, secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signing_secret_of(tenant: Tenant) -> str:
    """The tenant's Slack signing secret; empty (every click refused) when none is saved, or when it was
    sealed under another AIRLOCK_SEALING_KEY (logged: the admin saves it again)."""
    row = TenantNotificationSettings.objects.filter(tenant=tenant).first()
    if row is None or not row.sealed_slack_signing_secret:
        return ""
    try:
        return unseal(row.sealed_slack_signing_secret)
    except ValueError:
        logger.error("the Slack signing secret of %s cannot be unsealed with this deployment's key", tenant.slug)
        return ""


def verify_request(*, tenant: Tenant, secret: str, timestamp: str, signature: str, body: bytes) -> None:
    """Signed by the tenant's Slack app, fresh, and not seen before; otherwise SlackRefused."""
    expected = signature_of(secret=secret, timestamp=timestamp, body=body)
    if not secret or not hmac.compare_digest(expected.encode(), signature.encode()):
        raise SlackRefused("bad_signature", "The X-Slack-Signature does not match this tenant's signing secret.", 401)
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > REPLAY_WINDOW_SECONDS:
        raise SlackRefused("stale_request", "The X-Slack-Request-Timestamp is more than five minutes away.", 401)
    # Shared by every process (the cache is Redis when REDIS_URL is set); kept past the window, after
    # which the timestamp check refuses the request anyway.
    if not cache.add(f"slack-seen:{tenant.pk}:{signature}", 1, timeout=2 * REPLAY_WINDOW_SECONDS):
        raise SlackRefused("replayed", "This signed request was already received; it is not acted on twice.", 409)


@dataclass(frozen=True)
class Click:
    """One button press, as much of Slack's block_actions payload as Airlock reads."""

    team_id: str
    user_id: str
    username: str
    action: str  # "approve", "decline", "link_check" or "link_confirm"
    value: str  # the button's value: a request's id, or (link_confirm) the proposal and its code
    typed: str  # what the user typed in the message's box: a decline's reason, or the console's code
    response_url: str


def _typed(payload: dict, action: str) -> str:
    block, field = (
        (LINK_CODE_BLOCK, LINK_CODE_INPUT)
        if action == "link_check"
        else (
            notices.SLACK_REASON_BLOCK,
            notices.SLACK_REASON_INPUT,
        )
    )
    values = (payload.get("state") or {}).get("values") or {}
    typed = ((values.get(block) or {}).get(field) or {}).get("value")
    return str(typed or "").strip()


def _check_response_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or parts.hostname not in settings.AIRLOCK_SLACK_RESPONSE_HOSTS:
        raise SlackRefused("bad_payload", "The response_url is not on a Slack host Airlock answers to.")
    return url


def parse_click(body: bytes) -> Click:
    """The form-encoded `payload=` JSON Slack posts for a button; SlackRefused when it is not one of ours."""
    try:
        payload = bounded_json.loads(parse_qs(body.decode())["payload"][0])
        action = payload["actions"][0]
        user, team = payload["user"], payload.get("team") or {}
    except bounded_json.TooDeep as exc:
        raise SlackRefused("bad_payload", f"The payload is not one Slack sends: {exc}.") from None
    except (KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError):
        raise SlackRefused("bad_payload", "Expected a form field `payload` holding a block_actions JSON.") from None
    if payload.get("type") != "block_actions" or action.get("action_id") not in ACTIONS:
        raise SlackRefused("bad_payload", "Only Airlock's buttons (Approve, Decline, linking) are handled here.")
    team_id, user_id = str(team.get("id") or user.get("team_id") or ""), str(user.get("id") or "")
    if not all(SLACK_ID.fullmatch(value) for value in (team_id, user_id)):
        raise SlackRefused("bad_payload", "The payload's user and team must be Slack ids (letters and digits).")
    return Click(
        team_id=team_id,
        user_id=user_id,
        username=str(user.get("username") or user.get("name") or ""),
        action=ACTIONS[action["action_id"]],
        value=str(action.get("value") or ""),
        typed=_typed(payload, ACTIONS[action["action_id"]]),
        response_url=_check_response_url(str(payload.get("response_url") or "")),
    )


# --- answers ----------------------------------------------------------------------------------------


def _ephemeral(text: str) -> dict:
    """A note only the clicking user sees; the message itself stays as it was."""
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


def outcome_message(approval: ApprovalRequest) -> dict:
    """The message as it reads once decided: no buttons left, who decided and how."""
    notice = notices.notice_of(approval)
    e = notices.slack_escape
    headline = f"{e(notice.tenant)}: {e(notice.skill)} ({e(notice.effect)})"
    if approval.is_pending:
        outcome = "expired" if approval.is_expired_now else "still pending"
    else:
        via = f" via {approval.decided_via}" if approval.decided_via not in ("", "system") else ""
        outcome = f"{approval.decision_word} by {e(approval.decided_by_label or 'someone')}{via}"
    text = f"{headline}: {outcome}"
    return {
        "replace_original": True,
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}*: {outcome}"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{notice.link}|Open the request>"}]},
        ],
    }


def link_token(*, tenant: Tenant, team_id: str, user_id: str, username: str) -> str:
    """A signed, ten-minute claim "this Slack user pressed a button of this tenant", for the console."""
    return signing.dumps({"t": tenant.pk, "team": team_id, "user": user_id, "name": username}, salt=LINK_SALT)


def read_link_token(token: str) -> dict:
    """The Slack identity a link token names; SlackRefused when forged or older than ten minutes."""
    try:
        return signing.loads(token, salt=LINK_SALT, max_age=LINK_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        raise SlackRefused(
            "link_expired", "This link is older than ten minutes: press the button in Slack again."
        ) from None
    except signing.BadSignature:
        raise SlackRefused("bad_link", "This link is not one Airlock made.") from None


def _plain(text: str) -> dict:
    return {"type": "plain_text", "text": text}


def _button(label: str, action_id: str, value: str = "") -> dict:
    button = {"type": "button", "action_id": action_id, "text": _plain(label[:75])}
    return {**button, "value": value} if value else button


def _link_instructions(tenant: Tenant, click: Click) -> dict:
    """Not linked: a console link naming this Slack user, and a box for the code the console then shows."""
    token = link_token(tenant=tenant, team_id=click.team_id, user_id=click.user_id, username=click.username)
    url = public_reverse("approvals:slack_link", args=[token])
    text = (
        f"Your Slack account is not linked to an Airlock approver in {tenant.slug}, so nothing was decided. "
        f"To link it, open <{url}|this link> signed in to the Airlock console (within ten minutes) and confirm "
        "there; the console shows a code. Type the code in the box below and press Check the code: Airlock "
        "then names the console account, and you confirm here."
    )
    code_box = {"type": "plain_text_input", "action_id": LINK_CODE_INPUT, "placeholder": _plain("ABCD-EFGH")}
    return {
        **_ephemeral(text),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "input",
                "block_id": LINK_CODE_BLOCK,
                "optional": True,
                "label": _plain("Code from the Airlock console"),
                "element": code_box,
            },
            {"type": "actions", "elements": [_button("Check the code", LINK_CHECK)]},
        ],
    }


def _link_refused(exc: Exception) -> dict:
    return _ephemeral(f"Nothing was linked. {exc}")


def _answer_link_check(tenant: Tenant, click: Click) -> dict:
    """The code matched a proposal: name the console account it would link, with a button to confirm."""
    try:
        proposal = slack_linking.proposal_for_code(
            tenant=tenant, team_id=click.team_id, slack_user_id=click.user_id, code=click.typed
        )
    except slack_linking.LinkRefused as exc:
        return _link_refused(exc)
    user, e = proposal.user, notices.slack_escape
    account = user.username + (f" ({user.get_full_name()})" if user.get_full_name() else "")
    text = (
        f"The Airlock account *{e(account)}* in {e(tenant.name)} asked to link your Slack user "
        f"{click.user_id}. Once linked, your Approve and Decline buttons decide as {e(user.username)}. "
        f"Press Link me to {e(user.username)} only if that is your own Airlock account."
    )
    value = f"{proposal.pk}:{slack_linking.normalized(click.typed)}"  # the code again: confirming checks it too
    confirm = _button(f"Link me to {user.username}", LINK_CONFIRM, value)
    return {
        **_ephemeral(text),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "actions", "elements": [{**confirm, "style": "primary"}]},
        ],
    }


def _answer_link_confirm(tenant: Tenant, click: Click) -> dict:
    proposal_ref, _, code = click.value.partition(":")
    try:
        if not proposal_ref.isdigit() or len(proposal_ref) > 18:
            raise slack_linking.LinkRefused("This button is not one Airlock sent for linking.")
        link = slack_linking.confirm_slack_link(
            tenant=tenant, team_id=click.team_id, slack_user_id=click.user_id, proposal_id=int(proposal_ref), code=code
        )
    except slack_linking.LinkRefused as exc:
        return _link_refused(exc)
    return _ephemeral(
        f"Linked: your Slack user {click.user_id} now decides as {notices.slack_escape(link.user.username)} "
        f"in {notices.slack_escape(tenant.name)}. Press Approve or Decline on the request again."
    )


def _approval_id(ref: str) -> int | None:
    return int(ref) if ref.isdigit() and len(ref) <= 18 else None


def answer_click(*, tenant: Tenant, click: Click) -> dict:
    """Decide as the linked user, under every rule of the inbox (or take a step of linking); the answer for
    the response_url."""
    if click.action == "link_check":
        return _answer_link_check(tenant, click)
    if click.action == "link_confirm":
        return _answer_link_confirm(tenant, click)
    link = (
        SlackLink.objects.select_related("user")
        .filter(tenant=tenant, slack_team_id=click.team_id, slack_user_id=click.user_id, user__is_active=True)
        .first()
    )
    if link is None:
        return _link_instructions(tenant, click)
    user = link.user
    approval = (
        ApprovalRequest.objects.visible_to(user)
        .select_related("tenant", "call__run", "call__skill_version")
        .filter(tenant=tenant, pk=_approval_id(click.value))
        .first()
    )
    if approval is None:
        return _ephemeral("Airlock has no such request in this tenant; nothing was decided.")
    if not approval.is_pending:  # decided elsewhere since the message was posted: show how
        return outcome_message(approval)
    try:
        approval = services.decide_approval(
            approval=approval, user=user, decision=click.action, reason=click.typed, via="slack"
        )
    except services.AlreadyDecided as exc:
        return outcome_message(exc.request)
    except services.InvalidDecision as exc:
        hint = REASON_HINT if click.action == "decline" else ""
        return _ephemeral(f"Nothing was decided: {exc}{hint}")
    except PermissionDenied as exc:
        return _ephemeral(f"Nothing was decided: {exc}")
    if approval.is_pending:  # a two-person request: this was one vote
        return _ephemeral(f"Your approval is recorded ({approval.votes.count()} of {approval.required_approvals}).")
    return outcome_message(approval)


def send_answer(*, response_url: str, body: dict[str, Any]) -> None:
    """Post the answer to Slack's response_url, behind the egress guard; a failure is logged, not retried
    (the decision stands and the console shows it)."""
    try:
        with egress.client(timeout=settings.AIRLOCK_WEBHOOK_TIMEOUT_SECONDS) as client:
            client.post(_check_response_url(response_url), json=body).raise_for_status()
    except (httpx.HTTPError, egress.EgressRefused, SlackRefused) as exc:
        logger.warning("slack answer not delivered: %s", type(exc).__name__)


def answer_later(*, response_url: str, body: dict) -> None:
    """Slack wants its 200 within three seconds: the answer goes out from a worker after commit."""
    transaction.on_commit(lambda: tasks.answer_slack.delay(response_url, body), robust=True)
