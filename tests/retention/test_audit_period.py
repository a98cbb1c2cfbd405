"""The audit period counts from when an approval's audit rows outlived their run, and the dry run
counts what the purge deletes, read as an auditor checking the promise "kept 365 days after the run".

The defect: a run closed 100 days ago whose approval was written 400 days ago lost its audit rows in
the same pass that deleted the run (their age was counted from creation), and `--dry-run` said 0.
"""

from __future__ import annotations

import re
from datetime import timedelta
from importlib import import_module
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.models import ApprovalEvent, ApprovalRequest
from retention.services import count_expired, purge_expired_records
from runs.models import Run
from tests.retention.factories import closed_run, retention_periods

pytestmark = pytest.mark.django_db

KINDS = (
    "runs",
    "calls",
    "events",
    "approvals",
    "idempotency_records",
    "deliveries",
    "audit_redacted",
    "audit_deleted",
)


@pytest.fixture(autouse=True)
def _periods(settings):
    retention_periods(settings)


@pytest.fixture
def world(acme, agent, approver, django_capture_on_commit_callbacks):
    def build(*, closed_days_ago: int, written_days_ago: int | None = None):
        w = closed_run(
            tenant=acme,
            agent=agent,
            approver=approver,
            capture=django_capture_on_commit_callbacks,
            days_ago=closed_days_ago,
        )
        if written_days_ago is not None:  # an approval decided long before the run finally closed
            written = timezone.now() - timedelta(days=written_days_ago)
            ApprovalRequest.objects.filter(pk=w.approval.pk).update(created_at=written)
            ApprovalEvent.retention_queryset().filter(request=w.approval).update(created_at=written)
        return w

    return build


def audit_rows(approval) -> list[ApprovalEvent]:
    return list(ApprovalEvent.objects.filter(approval_ref=approval.pk))


def test_audit_rows_written_before_a_long_run_get_the_whole_period_from_the_runs_deletion(world):
    w = world(closed_days_ago=100, written_days_ago=400)
    written = audit_rows(w.approval)
    assert len(written) >= 2
    now = timezone.now()

    report = purge_expired_records(now=now)

    assert report.runs == 1 and not Run.objects.filter(pk=w.run.pk).exists()
    assert report.audit_deleted == 0
    kept = audit_rows(w.approval)
    assert {row.pk for row in kept} == {row.pk for row in written}
    for row in kept:
        assert row.request_id is None and row.redacted_at == now and row.detached_at == now
        assert row.created_at < now - timedelta(days=399)  # written long ago, still kept

    assert purge_expired_records(now=now + timedelta(days=364)).audit_deleted == 0
    assert len(audit_rows(w.approval)) == len(written)
    assert purge_expired_records(now=now + timedelta(days=366)).audit_deleted == len(written)
    assert audit_rows(w.approval) == []


def test_rows_detached_some_other_way_start_their_period_when_retention_redacts_them(world):
    w = world(closed_days_ago=5, written_days_ago=1000)  # a recent run, deleted by an admin
    Run.objects.filter(pk=w.run.pk).delete()
    now = timezone.now()

    report = purge_expired_records(now=now)

    assert report.audit_redacted == len(audit_rows(w.approval)) and report.audit_deleted == 0
    assert {row.detached_at for row in audit_rows(w.approval)} == {now}
    assert purge_expired_records(now=now + timedelta(days=364)).audit_deleted == 0
    count = len(audit_rows(w.approval))
    assert purge_expired_records(now=now + timedelta(days=366)).audit_deleted == count > 0


def report_of(output: str) -> dict[str, int]:
    return {label: int(count) for label, count in re.findall(r"^  ([a-z ]+): (\d+)$", output, re.M)}


def everything() -> dict:
    """Every row retention could touch, as it stands."""
    return {
        "runs": sorted(Run.objects.values_list("pk", "status")),
        "approvals": sorted(ApprovalRequest.objects.values_list("pk", flat=True)),
        "audit": sorted(
            ApprovalEvent.objects.values_list("pk", "request_id", "redacted_at", "detached_at", "detail"),
            key=lambda row: row[0],
        ),
    }


def test_the_dry_run_counts_exactly_what_the_pass_then_deletes(world):
    long_detached = world(closed_days_ago=600)
    purge_expired_records(now=timezone.now() - timedelta(days=400))  # detached 400 days ago: expired now
    long_detached_rows = len(audit_rows(long_detached.approval))
    world(closed_days_ago=100, written_days_ago=400)  # goes now; its rows are detached now, not expired
    world(closed_days_ago=120)
    stray = world(closed_days_ago=5)
    Run.objects.filter(pk=stray.run.pk).delete()  # an admin's deletion: rows detached, unredacted
    world(closed_days_ago=10)  # stays
    before = everything()

    dry = StringIO()
    call_command("purge_expired_records", "--dry-run", stdout=dry)

    assert everything() == before, "the dry run changed something"
    real = StringIO()
    call_command("purge_expired_records", stdout=real)
    counted, deleted = report_of(dry.getvalue()), report_of(real.getvalue())
    assert len(counted) == len(KINDS) and counted == deleted, (counted, deleted)
    assert deleted["runs"] == 2 and deleted["approval requests"] == 2
    assert deleted["audit rows deleted"] == long_detached_rows > 0 and audit_rows(long_detached.approval) == []
    assert deleted["audit rows redacted"] > 0


def test_the_dry_run_service_matches_the_pass_for_each_kind(world):
    world(closed_days_ago=600)
    purge_expired_records(now=timezone.now() - timedelta(days=400))
    world(closed_days_ago=100, written_days_ago=400)
    stray = world(closed_days_ago=5)
    Run.objects.filter(pk=stray.run.pk).delete()
    now = timezone.now()

    counted = count_expired(now=now)
    done = purge_expired_records(now=now)

    assert {kind: getattr(counted, kind) for kind in KINDS} == {kind: getattr(done, kind) for kind in KINDS}
    assert done.finished and done.runs == 1 and done.audit_deleted > 0 and done.audit_redacted > 0


def test_the_migration_dates_rows_detached_before_it_by_their_redaction(world):
    module = import_module("approvals.migrations.0006_audit_age_counts_from_detachment")
    w = world(closed_days_ago=200)
    redacted_at = timezone.now() - timedelta(days=30)
    purge_expired_records(now=redacted_at)
    ApprovalEvent.retention_queryset().filter(approval_ref=w.approval.pk).update(detached_at=None)  # as before it

    migration = ("approvals", "0006_audit_age_counts_from_detachment")
    module.detached_when_redacted(MigrationExecutor(connection).loader.project_state([migration]).apps, None)

    assert {row.detached_at for row in audit_rows(w.approval)} == {redacted_at}
