import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from airlock.demo import seed_all
from approvals.models import ApprovalRequest, NotificationPreference

pytestmark = pytest.mark.django_db


def test_demo_seeds_two_pending_requests_once(settings, tmp_path):
    seed_all()
    seed_all()
    pending = ApprovalRequest.objects.pending().filter(tenant__slug="acme")
    assert sorted(pending.values_list("skill_name", flat=True)) == [
        "billing.create_refund_request",
        "support.send_email",
    ]


def test_demo_approvers_are_told_as_they_chose(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        seed_all()
    alice_mails = [m for m in mail.outbox if m.to == ["alice@example.com"]]
    # one per waiting request, at once (the default); the refund declined while seeding is not news any more
    assert len(alice_mails) == ApprovalRequest.objects.pending().count() == 2
    assert NotificationPreference.objects.get(user__username="bob").mode == "digest"
    assert not [m for m in mail.outbox if "bob" in m.to[0]]


def test_demo_routes_the_refund_to_billing_and_the_email_to_everyone():
    seed_all()
    refund = ApprovalRequest.objects.get(skill_name="billing.create_refund_request", status="pending")
    email = ApprovalRequest.objects.get(skill_name="support.send_email")
    assert refund.group.name == "billing" and list(refund.group.members.values_list("username", flat=True)) == ["alice"]
    assert email.group is None
    bob = get_user_model().objects.get(username="bob")
    assert list(ApprovalRequest.objects.routed_to(bob).pending()) == [email]
