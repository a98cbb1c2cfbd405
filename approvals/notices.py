"""What a notification of a new request says: the skill, its effect, the short "why" and a link.

Every word comes from fields already redacted at rest (traces.redaction). The arguments appear only
for public and internal skills, in their stored (redacted) form; for confidential and restricted
skills they are withheld entirely, not even the hash and preview that the stored form keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from approvals.models import ApprovalRequest
from lib.public_url import public_reverse
from traces.redaction import WHOLE_PAYLOAD_CLASSIFICATIONS

ARGUMENTS_CHARS = 300
# The ids of the interactive parts of a Slack message (approvals.slack reads them back).
SLACK_APPROVE = "airlock_approve"
SLACK_DECLINE = "airlock_decline"
SLACK_REASON_BLOCK = "airlock_reason"
SLACK_REASON_INPUT = "reason"
WITHHELD = "withheld: a confidential skill's arguments are shown only on the request page"


def arguments_withheld(approval: ApprovalRequest) -> bool:
    """The request's skill is confidential or restricted: its arguments never leave the console."""
    return str(approval.action.get("data_classification") or "") in WHOLE_PAYLOAD_CLASSIFICATIONS


@dataclass(frozen=True)
class Notice:
    """One request as a notification shows it."""

    approval_id: int
    tenant: str
    skill: str
    version: str
    effect: str
    why: str
    agent: str
    arguments: str
    expires: str
    link: str
    decided_by: str = "every approver"  # or the routed group: "the billing group"


def notice_of(approval: ApprovalRequest) -> Notice:
    if arguments_withheld(approval):
        arguments = WITHHELD
    else:
        arguments = json.dumps(approval.action.get("arguments"), ensure_ascii=False, sort_keys=True)
        if len(arguments) > ARGUMENTS_CHARS:
            arguments = arguments[:ARGUMENTS_CHARS] + "…"
    return Notice(
        approval_id=approval.pk,
        tenant=approval.tenant.slug,
        skill=approval.skill_name,
        version=approval.skill_version,
        effect=approval.effect or "unknown",
        why=approval.reason or "the policy asks a person to confirm",
        agent=str(approval.context.get("agent") or "an agent"),
        arguments=arguments,
        expires=f"{approval.expires_at:%Y-%m-%d %H:%M} UTC",
        link=public_reverse("approvals:detail", args=[approval.pk]),
        decided_by=f"the {approval.group.name} group" if approval.group_id else "every approver",
    )


def slack_escape(text: str) -> str:
    """Slack reads &, < and > as markup (links, mentions); an agent's text must stay text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _decision_blocks(notice: Notice) -> list[dict]:
    """A reason box and Approve / Decline buttons; a button's value is the request's id, nothing else."""
    return [
        {
            "type": "input",
            "block_id": SLACK_REASON_BLOCK,
            "optional": True,
            "label": {"type": "plain_text", "text": "Reason (required to decline)"},
            "element": {"type": "plain_text_input", "action_id": SLACK_REASON_INPUT, "multiline": True},
        },
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": SLACK_APPROVE,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": str(notice.approval_id),
                },
                {
                    "type": "button",
                    "action_id": SLACK_DECLINE,
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Decline"},
                    "value": str(notice.approval_id),
                },
                {"type": "button", "text": {"type": "plain_text", "text": "Open the request"}, "url": notice.link},
            ],
        },
    ]


def slack_body(notice: Notice, *, interactive: bool = False) -> str:
    """A Slack incoming-webhook message (`text` for notifications, `blocks` for the layout); with
    `interactive`, the tenant's Slack app signs clicks on its Approve and Decline buttons."""
    e = slack_escape
    headline = f"{e(notice.tenant)}: {e(notice.skill)} ({e(notice.effect)}) needs approval"
    details = (
        f"*Why:* {e(notice.why)}\n*Agent:* {e(notice.agent)}\n*Arguments:* {e(notice.arguments)}\n"
        f"*Expires:* {notice.expires}\n*Decided by:* {e(notice.decided_by)}"
    )
    body = {
        "text": f"{headline}: {notice.link}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}*"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": details}},
        ],
    }
    if interactive:
        body["blocks"] += _decision_blocks(notice)
    else:
        link = {"type": "button", "text": {"type": "plain_text", "text": "Open the request"}, "url": notice.link}
        body["blocks"].append({"type": "actions", "elements": [link]})
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _mail_lines(notice: Notice, decide_link: str) -> str:
    decide = f"Approve or decline (you confirm in the console): {decide_link}\n" if decide_link else ""
    return (
        f"{notice.skill} {notice.version} ({notice.effect}), asked by {notice.agent}\n"
        f"Why: {notice.why}\n"
        f"Arguments: {notice.arguments}\n"
        f"Expires: {notice.expires}\n"
        f"Decided by: {notice.decided_by}\n"
        f"Open it: {notice.link}\n"
        f"{decide}"
    )


def mail_of(notice: Notice, decide_link: str = "") -> tuple[str, str]:
    """Subject and body of the e-mail about one request; `decide_link` is the recipient's own."""
    subject = f"[Airlock] {notice.tenant}: {notice.skill} ({notice.effect}) needs approval"
    return subject, f"A request in {notice.tenant} waits for an approver.\n\n{_mail_lines(notice, decide_link)}"


def digest_of(tenant: str, notices: list[tuple[Notice, str]]) -> tuple[str, str]:
    """Subject and body of one digest e-mail grouping several requests, each with its decision link."""
    subject = f"[Airlock] {tenant}: {len(notices)} request{'s' if len(notices) != 1 else ''} waiting for approval"
    parts = [f"Still pending in {tenant} since your last digest:\n"]
    parts += [f"{i}. {_mail_lines(n, link)}" for i, (n, link) in enumerate(notices, start=1)]
    return subject, "\n".join(parts)
