"""The attacker respells their own name as the run's end user, hoping the self-approval rule misses it."""

import pytest
from django.urls import reverse

from approvals.models import ApprovalStatus
from approvals.services import DecisionRefused, decide_approval
from console.models import Role
from lib.identity import bound_account_id, identity_key, identity_keys, is_same_person, skeleton
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


# How directories, chat tools and mail clients write alice (username alice, e-mail alice@example.com).
RESPELLINGS_OF_ALICE = [
    "Alice <alice@example.com>",
    "<alice@example.com>",
    '"alice"',
    "alice@example.com.",
    "@alice",
    "<@alice>",
    "<@U024BE7LH|alice>",
    "acme\\alice",
    "ACME\\Alice",
    "alice+x@example.com",
    "uid=alice,ou=people",
    "cn=Alice,ou=people,dc=acme,dc=com",
    "ALİCE",  # Turkish dotted capital I
    "alıce",  # Turkish dotless i
    "slack:alice",
    "github:Alice",
    "okta:alice@example.com",
    "azuread:ACME\\alice",
    "\u0430lice",  # Cyrillic а
    "\u0430l\u0456c\u0435",  # Cyrillic а, і, е
    "\u03b1lice",  # Greek α
    'user:"Alice" <alice+ops@example.com.>',
    # A review's spellings (tests/security/test_identity_spoofing.py respells every approver's name this way).
    "alice\u034f",  # combining grapheme joiner
    "alice\ufe0f",  # variation selector
    "a\u3164lice",  # Hangul filler
    "a\u026bice",  # ɫ, l with middle tilde
    "\u13aalice",  # Cherokee Ꭺ
]


@pytest.fixture
def bob(acme):
    return make_user("bob", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


@pytest.fixture
def alice(acme):
    return make_user("alice", tenant=acme, roles=[Role.APPROVER, Role.VIEWER])


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
    # A space between letters is no longer a different name (tests/security/test_identity_spoofing.py).
    for someone_else in ["bobby", "rob", "alice", "bob2", "", "user:", f"account:{bob.pk + 1}", "account:x"]:
        assert not is_same_person(someone_else, bob), someone_else


def test_identity_key_is_one_normal_form():
    assert {identity_key(spelling) for spelling in RESPELLINGS_OF_BOB[:9]} == {"bob"}
    assert identity_key("Straße") == identity_key("STRASSE")  # full case folding, not lower()
    assert bound_account_id("Account: 42") == 42 and bound_account_id("user:42") is None


@pytest.mark.parametrize("end_user", RESPELLINGS_OF_ALICE)
def test_alice_cannot_approve_a_run_for_her_directory_or_chat_spelling(acme, agent, alice, bob, executions, end_user):
    request = open_request(tenant=acme, agent=agent, end_user=end_user)
    api, _ = _pat_client(alice)
    refused = api.post(
        reverse("approvals_api:approval_decision", args=[request.pk]), {"decision": "approve"}, format="json"
    )
    assert refused.status_code == 403 and "own behalf" in refused.json()["error"]["message"]
    with pytest.raises(DecisionRefused, match="your own behalf"):
        decide_approval(approval=request, user=alice, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    # Someone else is still someone else: bob approves the run that acts for alice.
    assert decide_approval(approval=request, user=bob, decision="approve").status == ApprovalStatus.APPROVED


@pytest.mark.parametrize("end_user", RESPELLINGS_OF_ALICE)
def test_every_spelling_of_alice_is_alice_and_none_is_bob(alice, bob, end_user):
    assert is_same_person(end_user, alice)
    assert not is_same_person(end_user, bob)


def test_readings_do_not_make_strangers_the_same(alice):
    for someone_else in [
        "alicia",
        "malice",
        "Bob <bob@example.com>",
        "acme\\bob",
        "uid=bob,ou=people",
        "ou=alice-team,uid=bob",
        "slack:bob",
        "bob+alice@example.com",
        "<@bob>",
        "\u0430lic\u0435x",
    ]:
        assert not is_same_person(someone_else, alice), someone_else


def test_identity_keys_fold_lookalikes_and_unwrap_addresses():
    assert skeleton("ALİCE".casefold()) == "alice" and skeleton("b\u043eb") == "bob"
    assert "alice" in identity_keys("Alice <alice+ops@example.com.>")
    assert skeleton("alice@example.com") in identity_keys("Alice <alice+ops@example.com.>")
    assert identity_keys("") == identity_keys("\u200b ") == frozenset()
