import pytest
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
    assert len(alice_mails) == 2  # one per request, immediately (the default)
    assert NotificationPreference.objects.get(user__username="bob").mode == "digest"
    assert not [m for m in mail.outbox if "bob" in m.to[0]]
