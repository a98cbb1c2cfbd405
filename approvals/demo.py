"""Demo approvals for `seed_demo`: acme's `billing` approver group (alice) and the route that sends every
billing call to it; one run of acme's support bot waiting on two confirm calls (the refund routed to
billing, the e-mail to every approver); a refund declined (so that the decision history has a decision in
it); and bob's choice of a digest (alice keeps the default: an e-mail per request, printed to the log)."""

from __future__ import annotations

from approvals import routing_rules
from approvals.models import ApprovalRequest, ApproverGroup, NotificationPreference, NotifyMode
from approvals.notifications import save_notification_preference
from approvals.services import decide_approval
from runs.gate import process_batch
from runs.services import start_run

CALLS = [
    {
        "call_id": "refund-1",
        "name": "billing.create_refund_request",
        "arguments": {
            "order_id": "ord_5001",
            "amount_cents": 12900,
            "currency": "EUR",
            "reason_code": "damaged",
            "note": "Arrived with a cracked screen; photo in ticket 8841.",
        },
    },
    {
        "call_id": "mail-1",
        "name": "support.send_email",
        "arguments": {
            "to": "ada@example.org",
            "subject": "Your refund for order ord_5001",
            "body_text": "Hello Ada,\n\nwe have requested a full refund of EUR 129.00 for your order ord_5001. "
            "The money reaches your card within 5 working days.\n\nBest regards,\nAcme support",
        },
    },
]


BILLING_ROUTE = 'skill.namespace == "billing"'


def _seed_routing(acme, alice) -> None:
    """The billing group decides acme's billing calls (refunds); everything else goes to every approver."""
    if ApproverGroup.objects.filter(tenant=acme).exists():
        return
    billing = routing_rules.create_group(tenant=acme, name="billing", actor="seed_demo")
    routing_rules.add_group_member(group=billing, user=alice, actor="seed_demo")
    routing_rules.save_route(tenant=acme, name="refunds", condition=BILLING_ROUTE, group=billing, actor="seed_demo")


def seed(context) -> None:
    acme = context.tenants.get("acme")
    agent = context.agents.get("acme/support-bot")
    bob = context.users.get("bob")
    alice = context.users.get("alice")
    if acme is not None and alice is not None:
        _seed_routing(acme, alice)
    if acme is not None and bob is not None and not NotificationPreference.objects.filter(user=bob).exists():
        save_notification_preference(tenant=acme, user=bob, mode=NotifyMode.DIGEST, digest_minutes=30)
    if acme is None or agent is None or ApprovalRequest.objects.filter(tenant=acme).exists():
        return

    run = start_run(
        agent=agent,
        end_user="cus_ada100",
        end_user_roles=["customer"],
        task="Refund Ada's damaged order and tell her by email",
    )
    results = process_batch(run=run, calls=CALLS)
    waiting = [r for r in results if r.get("status") == "approval_required"]
    if waiting:
        context.lines.append(f"approvals: {len(waiting)} demo requests waiting in acme's inbox")
    if alice is not None:
        _declined_refund(agent, alice)


def _declined_refund(agent, decider) -> None:
    """Decided by a member of the billing group, the only people the refunds route lets decide it."""
    run = start_run(agent=agent, end_user="cus_bo200", end_user_roles=["customer"], task="Refund Bo's order again")
    call = {**CALLS[0], "call_id": "refund-2", "arguments": {**CALLS[0]["arguments"], "order_id": "ord_5002"}}
    result = process_batch(run=run, calls=[call])[0]
    if result.get("status") == "approval_required":
        approval = ApprovalRequest.objects.get(pk=result["approval_id"])
        decide_approval(approval=approval, user=decider, decision="decline", reason="Already refunded in ticket 8790.")
