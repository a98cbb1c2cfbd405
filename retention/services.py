"""Retention of runs and everything they own: calls, run events, approval requests and votes,
idempotency records, webhook deliveries, reconciliation items, long jobs and pipelines.

The orchestration lives here, above `runs`, `approvals` and `reliability`, because it deletes from
all three; each app's rows are deleted through its own models, and the approval audit log only
through `approvals.retention`, its one retention path.

A run goes when it is closed (completed, failed or cancelled), ended more than
AIRLOCK_RUN_RETENTION_DAYS ago, and nothing of it is still live: no call executing or awaiting
approval, no approval pending, approved or executing, no open reconciliation item, no running long
job, no unfinished pipeline. Rows go in small separate deletes of AIRLOCK_RETENTION_BATCH_SIZE,
children first, so no statement holds locks for long; an interrupted purge leaves rows the next
one finishes. Audit rows outlive the run, redacted, for AIRLOCK_AUDIT_RETENTION_DAYS counted from
that moment: approvals' (`approvals.retention`) and those of flagged local calls (`runs.local_audit`).
The dry run counts from the same selections the purge deletes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals import lifecycle as approval_lifecycle
from approvals import retention as audit
from approvals.models import ApprovalRequest, WebhookDelivery
from reliability.models import (
    JobStatus,
    LongJob,
    Pipeline,
    PipelineStatus,
    PipelineStep,
    ReconciliationItem,
    ReconciliationStatus,
)
from runs import local_audit
from runs.models import CallStatus, IdempotencyRecord, Run, RunEvent, RunStatus, StoredResult, ToolCall

CLOSED_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED)
LIVE_CALL_STATUSES = (CallStatus.EXECUTING, CallStatus.AWAITING_APPROVAL)
LIVE_APPROVAL_STATUSES = tuple(approval_lifecycle.APPROVAL_LIVE)
LIVE_PIPELINE_STATUSES = (PipelineStatus.PENDING, PipelineStatus.RUNNING, PipelineStatus.WAITING)
RUNS_PER_GROUP = 100
DEFAULT_MAX_BATCHES = 200


@dataclass
class RetentionReport:
    """What one purge deleted (or, for a dry run, would delete); `finished` is False when the batch
    budget ran out first and the next purge has more to do."""

    runs: int = 0
    calls: int = 0
    events: int = 0
    approvals: int = 0
    idempotency_records: int = 0
    deliveries: int = 0
    audit_redacted: int = 0
    audit_deleted: int = 0
    batches: int = 0
    finished: bool = True

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


class _Budget:
    def __init__(self, max_batches: int) -> None:
        self.left = max_batches

    def spend(self) -> None:
        self.left -= 1


def expired_runs(*, now: datetime | None = None) -> QuerySet[Run]:
    """The runs retention may delete now (the rule in the module docstring, written once)."""
    if not settings.AIRLOCK_RUN_RETENTION_DAYS:
        return Run.objects.none()
    cutoff = (now or timezone.now()) - timedelta(days=settings.AIRLOCK_RUN_RETENTION_DAYS)
    ended_before = Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, updated_at__lt=cutoff)
    return (
        Run.objects.filter(ended_before, status__in=CLOSED_RUN_STATUSES)
        .exclude(calls__status__in=LIVE_CALL_STATUSES)
        .exclude(calls__approval__status__in=LIVE_APPROVAL_STATUSES)
        .exclude(reconciliation_items__status=ReconciliationStatus.OPEN)
        .exclude(long_jobs__status=JobStatus.RUNNING)
        .exclude(pipelines__status__in=LIVE_PIPELINE_STATUSES)
    )


def _requests_of(run_ids: list | QuerySet) -> QuerySet[ApprovalRequest]:
    return ApprovalRequest.objects.filter(call__run_id__in=run_ids)


def _owned_rows(run_ids: list | QuerySet) -> list[tuple[str | None, QuerySet]]:
    """What a group of expired runs owns, children first, in the order a purge deletes it, each with
    the report's count it adds to (None: not reported). The purge and the dry run both read it."""
    return [
        ("deliveries", WebhookDelivery.objects.filter(run_id__in=run_ids)),
        ("events", RunEvent.objects.filter(run_id__in=run_ids)),
        ("approvals", _requests_of(run_ids)),
        ("idempotency_records", IdempotencyRecord.objects.filter(call__run_id__in=run_ids)),
        (None, ReconciliationItem.objects.filter(run_id__in=run_ids)),
        (None, PipelineStep.objects.filter(pipeline__run_id__in=run_ids)),
        (None, Pipeline.objects.filter(run_id__in=run_ids)),
        (None, LongJob.objects.filter(run_id__in=run_ids)),
        (None, StoredResult.objects.filter(run_id__in=run_ids)),  # the kept results pages are read from
        ("calls", ToolCall.objects.filter(run_id__in=run_ids)),
    ]


def count_expired(*, now: datetime | None = None) -> RetentionReport:
    """The dry run: what purges run until `finished` would delete or redact now, from the same selections
    they delete (`expired_runs`, `_owned_rows`, `approvals.retention`), deleting nothing. Audit rows the
    purge detaches start their period then, so they are not counted as deleted."""
    now = now or timezone.now()
    runs = expired_runs(now=now)
    run_ids = runs.values("pk")
    report = RetentionReport(runs=runs.count())
    for field, rows in _owned_rows(run_ids):
        if field:
            setattr(report, field, rows.count())
    calls = ToolCall.objects.filter(run_id__in=run_ids).values("pk")
    report.audit_redacted = (
        audit.unredacted_rows_of(_requests_of(run_ids).values("pk")).count()
        + audit.detached_unredacted().count()
        + local_audit.unredacted_rows_of(calls).count()
        + local_audit.detached_unredacted().count()
    )
    report.audit_deleted = audit.expired_audit(now=now).count() + local_audit.expired_audit(now=now).count()
    return report


def _delete_in_batches(queryset: QuerySet, *, batch_size: int, budget: _Budget) -> tuple[int, bool]:
    """Delete the queryset's rows `batch_size` at a time; (rows deleted, whether all are gone)."""
    model = queryset.model
    deleted = 0
    while budget.left > 0:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not ids:
            return deleted, True
        deleted += model.objects.filter(pk__in=ids).delete()[1].get(model._meta.label, 0)
        budget.spend()
    return deleted, False


def _delete_approvals(
    requests: QuerySet, *, now: datetime, batch_size: int, budget: _Budget, report: RetentionReport
) -> bool:
    while budget.left > 0:
        ids = list(requests.order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not ids:
            return True
        redacted, deleted = audit.redact_and_delete_requests(request_ids=ids, now=now)
        report.audit_redacted += redacted
        report.approvals += deleted
        budget.spend()
    return False


def _delete_calls(calls: QuerySet, *, now: datetime, batch_size: int, budget: _Budget, report: RetentionReport) -> bool:
    """Delete calls a batch at a time, each batch's flagged local calls kept as redacted audit rows first."""
    while budget.left > 0:
        ids = list(calls.order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not ids:
            return True
        redacted, deleted = local_audit.redact_and_delete_calls(call_ids=ids, now=now)
        report.audit_redacted += redacted
        report.calls += deleted
        budget.spend()
    return False


def _purge_group(run_ids: list, *, now: datetime, batch_size: int, budget: _Budget, report: RetentionReport) -> bool:
    """Delete one group of expired runs, children first; False when the budget ran out midway."""
    for field, rows in _owned_rows(run_ids):
        if field == "approvals":
            done = _delete_approvals(rows, now=now, batch_size=batch_size, budget=budget, report=report)
        elif field == "calls":
            done = _delete_calls(rows, now=now, batch_size=batch_size, budget=budget, report=report)
        else:
            deleted, done = _delete_in_batches(rows, batch_size=batch_size, budget=budget)
            if field:
                setattr(report, field, getattr(report, field) + deleted)
        if not done:
            return False
    # Checked again: a run that came back to life meanwhile keeps what is left of it.
    deleted, done = _delete_in_batches(
        expired_runs(now=now).filter(pk__in=run_ids), batch_size=batch_size, budget=budget
    )
    report.runs += deleted
    return done


def purge_expired_records(
    *, now: datetime | None = None, batch_size: int | None = None, max_batches: int = DEFAULT_MAX_BATCHES
) -> RetentionReport:
    """Delete expired runs and all they own, then redact and expire detached audit rows, in at most
    `max_batches` deletes of `batch_size` rows each. Safe to run twice or concurrently with itself
    (a second purge finds nothing left or deletes nothing twice); call again while not `finished`."""
    now = now or timezone.now()
    batch_size = batch_size or settings.AIRLOCK_RETENTION_BATCH_SIZE
    budget = _Budget(max_batches)
    report = RetentionReport()
    while budget.left > 0:
        run_ids = list(
            expired_runs(now=now).order_by("finished_at", "pk").values_list("pk", flat=True)[:RUNS_PER_GROUP]
        )
        if not run_ids:
            break
        if not _purge_group(run_ids, now=now, batch_size=batch_size, budget=budget, report=report):
            break
    for log in (audit, local_audit):  # approvals' audit rows, then flagged local calls'
        redacted, deleted, batches = log.purge_expired_audit(now=now, batch_size=batch_size, max_batches=budget.left)
        budget.left -= batches
        report.audit_redacted += redacted
        report.audit_deleted += deleted
    report.batches = max_batches - budget.left
    report.finished = budget.left > 0
    return report
