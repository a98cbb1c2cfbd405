from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import AlreadyDecided, decide_approval, escalate_overdue_approvals, expire_due_approvals
from approvals.tasks import expire_approvals
from runs.models import CallStatus
from tests.approvals.factories import open_request

pytestmark = pytest.mark.django_db


def _age(request, *, by: timedelta) -> None:
    ApprovalRequest.objects.filter(pk=request.pk).update(
        created_at=request.created_at - by, expires_at=request.expires_at - by
    )


def test_beat_expires_stale_requests_as_a_decline(acme, agent, executions, django_capture_on_commit_callbacks):
    stale = open_request(tenant=acme, agent=agent)
    fresh = open_request(tenant=acme, agent=agent)
    _age(stale, by=timedelta(hours=2))
    with django_capture_on_commit_callbacks(execute=True):
        assert expire_approvals.delay().get() == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == ApprovalStatus.EXPIRED and fresh.status == ApprovalStatus.PENDING
    assert stale.decided_by_label == "system (expired)"
    stale.call.refresh_from_db()
    assert stale.call.status == CallStatus.EXPIRED and stale.outcome["error"]["class"] == "expired"
    assert executions == []
    assert expire_due_approvals() == 0  # running again does nothing


def test_deciding_after_expiry_is_refused_even_before_beat_ran(acme, agent, approver, executions):
    request = open_request(tenant=acme, agent=agent)
    _age(request, by=timedelta(hours=2))
    with pytest.raises(AlreadyDecided, match="already expired by system"):
        decide_approval(approval=request, user=approver, decision="approve")
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED and executions == []


def test_overdue_requests_are_escalated_once_by_email_to_tenant_admins(
    acme, agent, tenant_admin, django_capture_on_commit_callbacks
):
    request = open_request(tenant=acme, agent=agent)
    open_request(tenant=acme, agent=agent)  # young: not escalated
    _age(request, by=timedelta(minutes=20))
    with django_capture_on_commit_callbacks(execute=True):
        assert escalate_overdue_approvals(now=timezone.now()) == 1
        assert escalate_overdue_approvals(now=timezone.now()) == 0
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [tenant_admin.email]
    assert f"approval {request.pk}" in mail.outbox[0].subject
    request.refresh_from_db()
    assert request.escalated_at is not None and request.events.filter(action="escalated").count() == 1


def test_beat_schedule_has_expiry_and_escalation():
    from console.celery import app

    app.loader.import_default_modules()
    app.finalize()
    tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {"approvals.tasks.expire_approvals", "approvals.tasks.escalate_approvals"} <= tasks
