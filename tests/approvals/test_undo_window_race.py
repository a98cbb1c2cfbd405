"""Cancelling a scheduled call races the worker that starts it once its window is over: one conditional
UPDATE decides, on PostgreSQL with two real connections. The call runs once, or never, and the loser is told."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from approvals import services
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.approvals.factories import open_request
from tests.approvals.test_undo_window import WINDOW, delayed_version

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _race(approval_id: int, canceller) -> dict:
    barrier = threading.Barrier(2)
    outcome: dict = {}

    def cancel() -> None:
        try:
            barrier.wait()
            approval = ApprovalRequest.objects.select_related("tenant", "call__run").get(pk=approval_id)
            services.cancel_scheduled_approval(approval=approval, user=canceller, reason="caught it in time")
            outcome["cancel"] = "won"
        except services.TooLateToCancel as exc:
            outcome["cancel"] = exc
        finally:
            connection.close()

    def work() -> None:
        try:
            barrier.wait()
            outcome["worker"] = services.resume_approval(approval_id=approval_id).status
        finally:
            connection.close()

    threads = [threading.Thread(target=cancel), threading.Thread(target=work)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcome


@pytest.mark.parametrize("attempt", range(6))
def test_cancel_and_the_worker_race_and_exactly_one_wins(
    acme, agent, approver, second_approver, executions, clock, attempt
):
    approval = open_request(tenant=acme, agent=agent, skill_version=delayed_version())
    services.decide_approval(approval=approval, user=approver, decision="approve")
    clock.advance(WINDOW + 1)  # the window is over: the worker may start it, and the approver still tries

    outcome = _race(approval.pk, second_approver)

    approval.refresh_from_db()
    if outcome["cancel"] == "won":
        assert executions == [] and approval.status == ApprovalStatus.CANCELLED
        assert approval.events.filter(action="executing").count() == 0
    else:
        assert isinstance(outcome["cancel"], services.TooLateToCancel)
        assert len(executions) == 1 and approval.status == ApprovalStatus.EXECUTED
        assert approval.events.filter(action="cancelled").count() == 0
    assert approval.events.filter(action__in=["executing", "cancelled"]).count() == 1
