"""At rest nothing of a confidential call's arguments survives its decision (issue 13): the approver saw
the real values at render time, the edit ran, and afterwards no table holds any argument value."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval
from runs.adapters.python import register
from runs.gate import process_batch
from tests.dbdump import database_text
from tests.runs.factories import grant, make_skill, run_for

pytestmark = pytest.mark.django_db(transaction=True)

ORDER_ID = "ord_Zq7Quokka"
NOTE = "Parcel soaked by the Zebra-Quartz storm"
AMOUNT, EDITED_AMOUNT = 73519, 61427
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "amount_cents"],
    "properties": {
        "order_id": {"type": "string", "title": "Order", "description": "The order to refund."},
        "amount_cents": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "note": {"type": "string"},
        "card_token": {"type": "string", "writeOnly": True},
    },
}
received: list[dict] = []


@register("at_rest.refund", effect="read")
def _refund(*, arguments, context):
    received.append(arguments)
    return {"refund_id": "rf_0001"}  # nothing of the arguments comes back


def _found(value, text: str) -> bool:
    if isinstance(value, int):
        return re.search(rf"(?<![0-9a-f]){value}(?![0-9a-f])", text) is not None
    return value in text


def test_no_argument_value_of_a_confidential_call_is_stored_after_its_decision(acme, agent, approver, client):
    received.clear()
    make_skill(
        "billing.refund_confidential",
        effect="external",
        approval="required",
        schema=SCHEMA,
        data="confidential",
        adapter="python:at_rest.refund",
        publish=False,
    )
    grant(acme, "billing.*")
    from registry.snapshots import publish_snapshot

    publish_snapshot(reason="at rest test")
    run = run_for(agent)
    arguments = {
        "order_id": ORDER_ID,
        "amount_cents": AMOUNT,
        "currency": "EUR",
        "note": NOTE,
        "card_token": "tok_9Kd83hQ",
    }
    result = process_batch(
        run=run, calls=[{"call_id": "r1", "name": "billing.refund_confidential", "arguments": arguments}]
    )[0]
    assert result["status"] == "approval_required"
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])

    # The approver sees the real values at render time; the write-only card token stays hidden.
    client.force_login(approver)
    page = client.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert ORDER_ID in page and NOTE in page and "EUR 735.19" in page
    assert "tok_9Kd83hQ" not in page

    decide_approval(
        approval=approval,
        user=approver,
        decision="approve",
        arguments={**arguments, "amount_cents": EDITED_AMOUNT, "card_token": "••••••"},
    )
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED
    assert received == [{**arguments, "amount_cents": EDITED_AMOUNT}]  # the hidden token kept its value

    stored = database_text()
    for value in (ORDER_ID, NOTE, AMOUNT, EDITED_AMOUNT, "tok_9Kd83hQ"):
        assert not _found(value, stored), f"{value!r} is stored in the database after the decision"
    assert "rf_0001" in stored  # the dump does hold the call's outcome: the search is real

    # Once final, nobody sees the values any more, the approver included: they are gone.
    page = client.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert ORDER_ID not in page and "dropped when the call reached its outcome" in page
