"""First decision wins, proven with concurrent requests on PostgreSQL (row-level semantics matter)."""

import threading

import pytest
from django.db import connection

from approvals.models import ApprovalStatus, ApprovalVote
from approvals.services import AlreadyDecided, DecisionRefused, decide_approval
from tests.approvals.factories import make_skill_version, open_request
from tests.conftest import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _concurrently(approval, people_and_decisions) -> list:
    barrier = threading.Barrier(len(people_and_decisions))
    outcomes: list = [None] * len(people_and_decisions)

    def act(index, person, decision):
        try:
            barrier.wait()
            outcomes[index] = decide_approval(
                approval=approval, user=person, decision=decision, reason="too risky" if decision == "decline" else ""
            ).status
        except (AlreadyDecided, DecisionRefused) as exc:
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=act, args=(i, p, d)) for i, (p, d) in enumerate(people_and_decisions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.parametrize("attempt", range(5))
def test_two_concurrent_decisions_one_wins(acme, agent, approver, second_approver, executions, attempt):
    approval = open_request(tenant=acme, agent=agent)
    outcomes = _concurrently(approval, [(approver, "approve"), (second_approver, "decline")])
    winners = [o for o in outcomes if isinstance(o, str)]
    losers = [o for o in outcomes if isinstance(o, AlreadyDecided)]
    assert len(winners) == 1 and len(losers) == 1
    approval.refresh_from_db()
    assert approval.events.filter(action__in=["approved", "declined"]).count() == 1
    assert str(losers[0]).startswith(f"already {approval.decision_word} by {approval.decided_by_label} at ")


def test_double_click_race_from_one_person(acme, agent, approver, executions):
    approval = open_request(tenant=acme, agent=agent)
    outcomes = _concurrently(approval, [(approver, "approve")] * 4)
    assert sum(isinstance(o, str) for o in outcomes) == 1
    assert sum(isinstance(o, AlreadyDecided) for o in outcomes) == 3


def test_two_person_concurrent_votes_approve_exactly_once(acme, agent, approver, second_approver, executions):
    third = make_user("approver3", tenant=acme, roles=["approver"])
    version = make_skill_version(name="iam.revoke_access", approval="two_person")
    approval = open_request(tenant=acme, agent=agent, skill_version=version)
    outcomes = _concurrently(approval, [(approver, "approve"), (second_approver, "approve"), (third, "approve")])
    approval.refresh_from_db()
    assert approval.status != ApprovalStatus.PENDING
    assert approval.events.filter(action="approved").count() == 1
    assert approval.events.filter(action="vote").count() == 1
    assert ApprovalVote.objects.filter(request=approval).count() == 2
    assert sum(isinstance(o, AlreadyDecided) for o in outcomes) == 1
