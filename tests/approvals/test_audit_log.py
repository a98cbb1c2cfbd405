"""The approval audit log is append-only for everyone but retention, and no cascade takes it away."""

from __future__ import annotations

import pytest
from django.contrib import admin

from approvals.admin import ApprovalEventInline
from approvals.models import AppendOnlyError, ApprovalEvent, ApprovalRequest
from approvals.retention import KEPT_DETAIL_KEYS, purge_expired_audit, redacted_detail
from runs.models import Run, ToolCall
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def row(acme, agent) -> ApprovalEvent:
    return ApprovalEvent.objects.filter(request=open_request(tenant=acme, agent=agent)).get()


def test_a_row_cannot_be_changed_or_deleted(row):
    row.action = "approved"
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    assert ApprovalEvent.objects.get(pk=row.pk).action == "requested"


def test_bulk_updates_and_deletes_are_refused(row):
    with pytest.raises(AppendOnlyError):
        ApprovalEvent.objects.filter(pk=row.pk).delete()
    with pytest.raises(AppendOnlyError):
        ApprovalEvent.objects.all().update(detail={})
    with pytest.raises(AppendOnlyError):
        ApprovalEvent.objects.bulk_update([row], ["detail"])
    with pytest.raises(AppendOnlyError):
        ApprovalEvent.objects.in_tenants([row.tenant_id]).delete()  # a scoped queryset too
    assert ApprovalEvent.objects.filter(pk=row.pk, detail__arguments_sha256__isnull=False).exists()


@pytest.mark.parametrize("deleted", ["approval", "call", "run"])
def test_deleting_what_the_row_records_keeps_the_row(row, deleted):
    """An admin (or any code) deleting the request, the call or the run: the row stays, detached,
    and the next retention pass redacts it."""
    approval = row.request
    target = {
        "approval": ApprovalRequest.objects.filter(pk=approval.pk),
        "call": ToolCall.objects.filter(pk=approval.call_id),
        "run": Run.objects.filter(pk=approval.call.run_id),
    }[deleted]
    target.delete()

    kept = ApprovalEvent.objects.get(pk=row.pk)
    assert kept.request_id is None and kept.approval_ref == approval.pk and kept.tenant_id == approval.tenant_id
    redacted, deleted_rows, _ = purge_expired_audit(batch_size=10, max_batches=10)
    assert (redacted, deleted_rows) == (1, 0)
    assert ApprovalEvent.objects.get(pk=row.pk).redacted_at is not None


def test_the_admin_offers_no_way_to_delete_or_add_rows(row, platform_admin, rf):
    assert ApprovalEvent not in admin.site._registry  # no changelist with a delete action
    inline = ApprovalEventInline(ApprovalRequest, admin.site)
    request = rf.get("/")
    request.user = platform_admin
    assert inline.can_delete is False and not inline.has_add_permission(request, row.request)


def test_the_redacted_form_keeps_identifiers_and_drops_values():
    detail = {
        "via": "console",
        "rule_id": "refund-needs-human",
        "votes": 2,
        "approvers": ["ann", "bob"],
        "arguments_sha256": "ab" * 32,
        "reason": "card 4242 4242 4242 4242 for customer c-42",
        "changes": [{"path": "amount_cents", "op": "replace", "from": 1250, "to": 99}],
        "notified": ["admin@example.com"],
        "anything_new": {"raw": "tok_live_secret"},
    }
    out = redacted_detail(detail)
    assert {key: out[key] for key in ("via", "rule_id", "votes", "approvers", "arguments_sha256")} == {
        key: detail[key] for key in ("via", "rule_id", "votes", "approvers", "arguments_sha256")
    }
    assert out["changes"] == [{"path": "amount_cents", "op": "replace"}]
    for key in ("reason", "notified", "anything_new"):
        assert key not in KEPT_DETAIL_KEYS and out[key]["redacted"] is True and out[key]["reason"] == "retention"
    for value in ("4242", "c-42", "1250", "99", "admin@example.com", "tok_live_secret"):
        assert value not in repr({k: v for k, v in out.items() if k != "arguments_sha256"})
