"""The inbox as a queue: like requests grouped, each card's history read from the record, decisions in bulk.

Like requests are those of one tenant's agent asking for one skill for one reason (the demo's support bot
asking three times to refund, because "refunds need a person"): an approver opens the group and decides a
selection of it, or all of it, with one reason. A bulk decision is only a loop: every request goes through
`decide_approval` on its own, with every rule of a single decision (the role, the routing, the two-person
rule, self-approval), in its own transaction and audit event, and the approver is told what became of each.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from approvals import questions, services
from approvals.models import ApprovalRequest, ApprovalStatus
from console.models import UserPreference

END_USER_WINDOW = timedelta(days=7)
AGENT_WINDOW = timedelta(days=30)
BULK_LIMIT = 200  # the most one bulk decision takes: the inbox shows at most 200 cards


def group_key(approval: ApprovalRequest) -> tuple:
    """Like requests share it; an agent's questions never do (each is answered on its own)."""
    if questions.is_question(approval):
        return ("question", approval.pk)
    return (approval.tenant_id, approval.skill_name, approval.agent_id, approval.reason)


def grouped(cards: list[dict]) -> list[list[dict]]:
    """Cards (the inbox's card contexts, newest first) gathered by `group_key`, each group where its newest
    member stood."""
    groups: dict[tuple, list[dict]] = {}
    for card in cards:
        groups.setdefault(group_key(card["approval"]), []).append(card)
    return list(groups.values())


# --- history from the record ------------------------------------------------------------------------------


def _outcome(status: str) -> str:
    if status in (ApprovalStatus.PENDING, ApprovalStatus.DECLINED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED):
        return status
    return "approved"  # scheduled, executing, executed and failed were approved first


@dataclass
class Tally:
    total: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, status: str, count: int) -> None:
        self.total += count
        self.outcomes[_outcome(status)] += count

    @property
    def decided(self) -> int:
        return self.total - self.outcomes["pending"]

    @property
    def decline_percent(self) -> int | None:
        return round(100 * self.outcomes["declined"] / self.decided) if self.decided else None

    def summary(self) -> str:
        """ "2 approved, 1 declined, 1 pending" (the outcomes that occurred, most common first)."""
        shown = sorted(((n, word) for word, n in self.outcomes.items() if n), reverse=True)
        return ", ".join(f"{n} {word}" for n, word in shown)


@dataclass
class CardHistory:
    """What the record says about a request's end user and agent with this skill (this one included)."""

    end_user: str
    agent: str
    for_end_user: Tally  # the end user's requests for this skill in END_USER_WINDOW
    by_agent: Tally  # the agent's requests for this skill in AGENT_WINDOW


def histories(approvals: list[ApprovalRequest]) -> dict[int, CardHistory]:
    """Each request's CardHistory, by request id: one query for the whole list, however long."""
    if not approvals:
        return {}
    now = timezone.now()
    end_users = {str(a.context.get("end_user") or "") for a in approvals} - {""}
    rows = (
        ApprovalRequest.objects.annotate(end_user=KeyTextTransform("end_user", "context"))
        .filter(
            tenant_id__in={a.tenant_id for a in approvals},
            skill_name__in={a.skill_name for a in approvals},
            created_at__gte=now - AGENT_WINDOW,
        )
        .filter(Q(agent_id__in={a.agent_id for a in approvals if a.agent_id}) | Q(end_user__in=end_users))
        .values("tenant_id", "skill_name", "agent_id", "end_user", "status")
        .annotate(total=Count("id"), this_week=Count("id", filter=Q(created_at__gte=now - END_USER_WINDOW)))
        .order_by()
    )
    by_end_user: dict[tuple, Tally] = defaultdict(Tally)
    by_agent: dict[tuple, Tally] = defaultdict(Tally)
    for row in rows:
        if row["end_user"] and row["this_week"]:
            by_end_user[(row["tenant_id"], row["skill_name"], row["end_user"])].add(row["status"], row["this_week"])
        if row["agent_id"]:
            by_agent[(row["tenant_id"], row["skill_name"], row["agent_id"])].add(row["status"], row["total"])
    result = {}
    for a in approvals:
        end_user = str(a.context.get("end_user") or "")
        result[a.pk] = CardHistory(
            end_user=end_user,
            agent=str(a.context.get("agent") or ""),
            for_end_user=by_end_user.get((a.tenant_id, a.skill_name, end_user), Tally()),
            by_agent=by_agent.get((a.tenant_id, a.skill_name, a.agent_id), Tally()),
        )
    return result


# --- deciding in bulk ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkOutcome:
    """What became of one request of a bulk decision: `ok` when this decision was recorded."""

    approval_id: int
    ok: bool
    message: str
    skill_name: str = ""


def decide_approvals(*, approval_ids: list[int], user, decision: str, reason: str) -> list[BulkOutcome]:
    """Decide each of these requests as `decide_approval` would one by one, in the order given; a request
    the user may not see (another tenant's, or no such request) is not touched and reported as not found."""
    visible = ApprovalRequest.objects.visible_to(user).select_related("tenant", "agent", "call__run", "group")
    found = visible.in_bulk(approval_ids[:BULK_LIMIT])
    outcomes = []
    for approval_id in dict.fromkeys(approval_ids[:BULK_LIMIT]):
        approval = found.get(approval_id)
        if approval is None:
            outcomes.append(BulkOutcome(approval_id, False, "not found: nothing was decided"))
            continue
        outcomes.append(_decide_one(approval, user=user, decision=decision, reason=reason))
    return outcomes


def _decide_one(approval: ApprovalRequest, *, user, decision: str, reason: str) -> BulkOutcome:
    try:
        approval = services.decide_approval(approval=approval, user=user, decision=decision, reason=reason)
    except services.AlreadyDecided as exc:
        return BulkOutcome(approval.pk, False, f"not decided: it was {exc}", approval.skill_name)
    except (services.InvalidDecision, PermissionDenied) as exc:
        return BulkOutcome(approval.pk, False, f"not decided: {exc}", approval.skill_name)
    if approval.is_pending:  # a two-person request: this was the first vote
        return BulkOutcome(
            approval.pk, True, "your approval is recorded; it waits for a second approver", approval.skill_name
        )
    return BulkOutcome(approval.pk, True, f"{approval.decision_word}", approval.skill_name)


# --- the layout ------------------------------------------------------------------------------------------


def compact_inbox(user) -> bool:
    return UserPreference.objects.filter(user=user, compact_inbox=True).exists()


def save_compact_inbox(*, user, compact: bool) -> bool:
    UserPreference.objects.update_or_create(user=user, defaults={"compact_inbox": compact})
    return compact
