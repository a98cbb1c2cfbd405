"""The attacker respells their own name as the run's end user, hoping the self-approval rule misses it."""

import pytest
from django.urls import reverse

from approvals.models import ApprovalStatus
from approvals.services import DecisionRefused, decide_approval
from console.models import Role
from lib.identity import bound_account_id, identity_key, is_same_person
from tests.approvals.factories import open_request
from tests.approvals.test_api import _pat_client
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

RESPELLINGS_OF_BOB = [
    "bob",
    "ｂｏｂ",
    "bob\u200b",
    "b\u200do\u2060b",
    "\ufeffbob",
    "BOB",
    "Bob ",
    "user:bob",
    "User: BOB",
    "username:bob",
    "mailto:Bob@Example.com",
    "BOB@EXAMPLE.COM",
    "user:ｂｏｂ\u200b",
]


@pytest.fixture
def bob(acme):
    return make_user("bob", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


@pytest.mark.parametrize("end_user", RESPELLINGS_OF_BOB)
def test_bob_cannot_approve_a_run_for_any_spelling_of_himself(acme, agent, bob, second_approver, executions, end_user):
    request = open_request(tenant=acme, agent=agent, end_user=end_user)
    with pytest.raises(DecisionRefused, match="your own behalf"):
        decide_approval(approval=request, user=bob, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert decide_approval(approval=request, user=second_approver, decision="approve").status == ApprovalStatus.APPROVED


def test_the_api_and_the_inbox_apply_the_same_rule(client, acme, agent, bob, executions):
    request = open_request(tenant=acme, agent=agent, end_user="user:ＢＯＢ")
    api, _ = _pat_client(bob)
    refused = api.post(
        reverse("approvals_api:approval_decision", args=[request.pk]), {"decision": "approve"}, format="json"
    )
    assert refused.status_code == 403 and "own behalf" in refused.json()["error"]["message"]
    client.force_login(bob)
    client.post(reverse("approvals:decide", args=[request.pk]), {"decision": "approve"})
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


def test_an_end_user_bound_to_an_account_id_is_compared_by_that_id(acme, agent, bob, second_approver, executions):
    request = open_request(tenant=acme, agent=agent, end_user=f"account:{bob.pk}")
    with pytest.raises(DecisionRefused):
        decide_approval(approval=request, user=bob, decision="approve")
    # The id binds: a username that happens to read like the binding is somebody else.
    assert not is_same_person(f"account:{bob.pk}", second_approver)
    assert decide_approval(approval=request, user=second_approver, decision="approve").status == ApprovalStatus.APPROVED


def test_other_people_are_still_other_people(bob):
    for someone_else in ["bobby", "rob", "alice", "b ob", "bob2", "", "user:", f"account:{bob.pk + 1}", "account:x"]:
        assert not is_same_person(someone_else, bob), someone_else


def test_identity_key_is_one_normal_form():
    assert {identity_key(spelling) for spelling in RESPELLINGS_OF_BOB[:9]} == {"bob"}
    assert identity_key("Straße") == identity_key("STRASSE")  # full case folding, not lower()
    assert bound_account_id("Account: 42") == 42 and bound_account_id("user:42") is None
