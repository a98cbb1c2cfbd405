import pytest

from airlock.demo import seed_all
from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db


def test_demo_seeds_two_pending_requests_once(settings, tmp_path):
    seed_all()
    seed_all()
    pending = ApprovalRequest.objects.pending().filter(tenant__slug="acme")
    assert sorted(pending.values_list("skill_name", flat=True)) == [
        "billing.create_refund_request",
        "support.send_email",
    ]
