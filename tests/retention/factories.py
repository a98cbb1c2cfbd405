"""A closed run that owns one of everything retention deletes, built the way production builds it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalRequest, WebhookDelivery
from approvals.services import decide_approval
from runs.events import append_event
from runs.models import Run, RunStatus, ToolCall
from tests.approvals.factories import make_paused_call, make_run, open_request

# The raw arguments of tests.approvals.factories.DEFAULT_ARGUMENTS and the decline's free text:
# none of these may survive in an audit row once the run is gone.
SECRET_VALUES = ("c-42", "tok_live_secret", "duplicate", "customer 7 disputes", "sk-live-")
DECLINE_REASON = "customer 7 disputes; key sk-live-abcdefghijklmnopqrstu"


@dataclass
class World:
    run: Run
    approval: ApprovalRequest


def closed_run(
    *, tenant, agent, approver, capture, status: str = RunStatus.COMPLETED, days_ago: int = 200, calls: int = 1
) -> World:
    """A run with a declined approval (its audit rows), extra finished calls, run events, an
    idempotency record per call and a webhook delivery; closed `days_ago` days ago."""
    approval = open_request(tenant=tenant, agent=agent)
    run = approval.call.run
    with capture(execute=True):  # the resume task records the declined call's outcome
        decide_approval(approval=approval, user=approver, decision="decline", reason=DECLINE_REASON)
    for _ in range(calls - 1):
        extra = make_paused_call(run=run)
        ToolCall.objects.filter(pk=extra.pk).update(status="succeeded", result={"content": {"ok": True}})
    event = append_event(run=run, kind="run.status", payload={"status": status})
    WebhookDelivery.objects.create(
        run=run, event=event, url="https://hooks.example.com/airlock", body="{}", status="delivered"
    )
    close(run, status=status, days_ago=days_ago)
    return World(run=run, approval=approval)


def close(run: Run, *, status: str = RunStatus.COMPLETED, days_ago: int = 200) -> None:
    ended = timezone.now() - timedelta(days=days_ago)
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=ended, created_at=ended)


def open_run(*, tenant, agent, status: str = RunStatus.RUNNING, days_ago: int = 3650) -> Run:
    run = make_run(tenant=tenant, agent=agent)
    make_paused_call(run=run)
    long_ago = timezone.now() - timedelta(days=days_ago)
    Run.objects.filter(pk=run.pk).update(status=status, created_at=long_ago, finished_at=None)
    # auto_now cannot be set through save(); an update can.
    Run.objects.filter(pk=run.pk).update(updated_at=long_ago)
    return run


def statements(fn, *args, **kwargs) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        result = fn(*args, **kwargs)
    return result, [query["sql"] for query in captured.captured_queries]


def retention_periods(settings) -> None:
    """The periods these tests are written against: runs kept 90 days, audit rows 365, 500 rows a batch."""
    settings.AIRLOCK_RUN_RETENTION_DAYS = 90
    settings.AIRLOCK_AUDIT_RETENTION_DAYS = 365
    settings.AIRLOCK_RETENTION_BATCH_SIZE = 500
