"""Retention of runs, read as an attacker or an auditor would: what goes, what must stay, and how."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus, ApprovalVote, WebhookDelivery
from console.management.commands.run_periodic import load_schedule
from reliability.models import ReconciliationItem, ReconciliationStatus
from retention import tasks
from retention.services import count_expired, expired_runs, purge_expired_records
from runs.models import CallStatus, IdempotencyRecord, Run, RunEvent, RunStatus, StoredResult, ToolCall
from runs.pagination import keep_full_result
from tests.retention.factories import SECRET_VALUES, close, closed_run, open_run, retention_periods, statements

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _periods(settings):
    retention_periods(settings)


@pytest.fixture
def world(acme, agent, approver, django_capture_on_commit_callbacks):
    def build(**kwargs):
        return closed_run(
            tenant=acme, agent=agent, approver=approver, capture=django_capture_on_commit_callbacks, **kwargs
        )

    return build


def rows_of(run: Run) -> dict[str, int]:
    return {
        "runs": Run.objects.filter(pk=run.pk).count(),
        "calls": ToolCall.objects.filter(run=run).count(),
        "events": RunEvent.objects.filter(run=run).count(),
        "approvals": ApprovalRequest.objects.filter(call__run=run).count(),
        "votes": ApprovalVote.objects.filter(request__call__run=run).count(),
        "idempotency_records": IdempotencyRecord.objects.filter(call__run=run).count(),
        "deliveries": WebhookDelivery.objects.filter(run=run).count(),
    }


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_an_old_closed_run_goes_with_every_row_it_owns(world, status):
    w = world(status=status, calls=3)
    before = rows_of(w.run)
    assert all(before[key] for key in ("runs", "calls", "events", "approvals", "idempotency_records", "deliveries"))

    report = purge_expired_records()

    assert rows_of(w.run) == dict.fromkeys(before, 0)
    assert (report.runs, report.calls, report.approvals, report.idempotency_records, report.deliveries) == (
        1,
        3,
        1,
        3,
        1,
    )
    assert report.events == before["events"] and report.finished


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.PAUSED])
def test_an_open_or_paused_run_of_any_age_stays(acme, agent, world, status):
    ancient = open_run(tenant=acme, agent=agent, status=status, days_ago=3650)
    gone = world()
    purge_expired_records()
    assert rows_of(ancient)["runs"] == 1 and rows_of(ancient)["calls"] == 1
    assert rows_of(gone.run)["runs"] == 0


def test_a_closed_run_inside_its_period_stays(world, settings):
    recent = world(days_ago=30)
    assert purge_expired_records().runs == 0
    assert rows_of(recent.run)["runs"] == 1
    settings.AIRLOCK_RUN_RETENTION_DAYS = 0  # kept forever
    close(recent.run, days_ago=10_000)
    assert purge_expired_records().runs == 0 and rows_of(recent.run)["runs"] == 1


def test_a_closed_run_with_a_call_awaiting_approval_stays(acme, agent):
    from tests.approvals.factories import open_request

    pending = open_request(tenant=acme, agent=agent)  # pending request, call awaiting approval
    close(pending.call.run, days_ago=400)
    assert purge_expired_records().runs == 0
    assert ApprovalRequest.objects.filter(pk=pending.pk, status=ApprovalStatus.PENDING).exists()
    assert rows_of(pending.call.run)["calls"] == 1


@pytest.mark.parametrize("status", [CallStatus.EXECUTING, CallStatus.AWAITING_APPROVAL])
def test_a_closed_run_with_a_live_call_stays(world, status):
    w = world(calls=2)
    ToolCall.objects.filter(run=w.run).exclude(approval__isnull=False).update(status=status)
    assert purge_expired_records().runs == 0
    assert rows_of(w.run)["calls"] == 2


def test_a_closed_run_under_reconciliation_stays_until_resolved(world):
    w = world()
    call = ToolCall.objects.filter(run=w.run).first()
    item = ReconciliationItem.objects.create(
        tenant=w.run.tenant, run=w.run, call=call, skill_name=call.name, reason="timeout"
    )
    assert purge_expired_records().runs == 0
    assert rows_of(w.run)["calls"] == 1

    ReconciliationItem.objects.filter(pk=item.pk).update(status=ReconciliationStatus.RESOLVED, resolution="succeeded")
    assert purge_expired_records().runs == 1
    assert not ReconciliationItem.objects.filter(pk=item.pk).exists()


def test_audit_rows_survive_redacted_naming_who_decided_what_when_for_which_skill_and_run(world):
    w = world()
    before = {row.pk: row for row in ApprovalEvent.objects.filter(request=w.approval)}
    assert {row.action for row in before.values()} >= {"requested", "declined"}

    purge_expired_records()

    kept = list(ApprovalEvent.objects.filter(approval_ref=w.approval.pk))
    assert {row.pk for row in kept} == set(before)
    for row in kept:
        assert row.request_id is None and row.redacted_at is not None
        assert (row.run_ref, row.tenant_id, row.skill_name) == (w.run.pk, w.run.tenant_id, w.approval.skill_name)
        assert row.call_ref == w.approval.call.call_id and row.skill_version == w.approval.skill_version
        original = before[row.pk]
        assert (row.actor_label, row.action, row.to_status, row.created_at) == (
            original.actor_label,
            original.action,
            original.to_status,
            original.created_at,
        )
        for secret in SECRET_VALUES:
            assert secret not in repr(row.detail), f"{secret!r} survived in the audit row {row.action}"
    declined = next(row for row in kept if row.action == "declined")
    assert declined.actor_label == "approver" and declined.detail["via"] == "console"
    assert declined.detail["reason"]["redacted"] is True  # free text: a hash marker, not the words
    requested = next(row for row in kept if row.action == "requested")
    assert requested.detail["arguments_sha256"] == w.approval.arguments_sha256


def test_audit_rows_have_their_own_longer_period(world):
    w = world()
    purge_expired_records()
    audit = ApprovalEvent.objects.filter(approval_ref=w.approval.pk)
    count = audit.count()
    assert count >= 2

    assert purge_expired_records(now=timezone.now() + timedelta(days=300)).audit_deleted == 0
    assert audit.count() == count
    report = purge_expired_records(now=timezone.now() + timedelta(days=366))
    assert report.audit_deleted == count and not audit.exists()


def test_audit_rows_of_a_live_request_are_never_expired(acme, agent):
    from tests.approvals.factories import open_request

    pending = open_request(tenant=acme, agent=agent)
    purge_expired_records(now=timezone.now() + timedelta(days=5000))
    row = ApprovalEvent.objects.get(request=pending)
    assert row.redacted_at is None and "arguments_sha256" in row.detail


def test_deletes_run_in_small_batches(world):
    w = world(calls=5)
    result, sql = statements(purge_expired_records, batch_size=2)
    call_deletes = [q for q in sql if re.match(r'DELETE FROM "runs_toolcall"', q)]
    assert len(call_deletes) == 3  # 5 calls, 2 per statement
    idempotency_deletes = [q for q in sql if re.match(r'DELETE FROM "runs_idempotencyrecord"', q)]
    assert len(idempotency_deletes) == 3
    assert result.calls == 5 and rows_of(w.run)["runs"] == 0


def test_a_batch_budget_stops_early_and_the_next_pass_finishes(world):
    w = world(calls=5)
    first = purge_expired_records(batch_size=2, max_batches=3)
    assert not first.finished and first.batches == 3
    assert rows_of(w.run)["runs"] == 1  # children first: the run is the last row to go
    second = purge_expired_records(batch_size=2)
    assert second.finished and rows_of(w.run) == dict.fromkeys(rows_of(w.run), 0)
    assert first.calls + second.calls == 5
    assert ApprovalEvent.objects.filter(approval_ref=w.approval.pk, redacted_at__isnull=False).count() >= 2


def test_running_twice_is_harmless(world):
    w = world()
    keep = world(days_ago=5)
    purge_expired_records()
    audit = {row.pk: (row.detail, row.redacted_at) for row in ApprovalEvent.objects.filter(approval_ref=w.approval.pk)}

    again = purge_expired_records()

    assert again.as_dict() == {**dict.fromkeys(again.as_dict(), 0), "batches": 0, "finished": True}
    assert {
        row.pk: (row.detail, row.redacted_at) for row in ApprovalEvent.objects.filter(approval_ref=w.approval.pk)
    } == audit
    assert rows_of(keep.run)["runs"] == 1


def test_dry_run_counts_and_deletes_nothing(world):
    w = world(calls=2)
    before = rows_of(w.run)
    counted = count_expired()
    assert (counted.runs, counted.calls, counted.approvals, counted.deliveries) == (1, 2, 1, 1)
    assert counted.audit_redacted == ApprovalEvent.objects.filter(request=w.approval).count()

    out = StringIO()
    call_command("purge_expired_records", "--dry-run", stdout=out)
    assert "runs: 1" in out.getvalue() and "tool calls: 2" in out.getvalue()
    assert rows_of(w.run) == before


def test_the_command_deletes_until_done(world):
    w = world(calls=3)
    out = StringIO()
    call_command("purge_expired_records", "--batch-size", "1", "--max-batches", "2", "--until-done", stdout=out)
    assert rows_of(w.run)["runs"] == 0
    assert "runs: 1" in out.getvalue() and "tool calls: 3" in out.getvalue()


def test_scheduled_through_beat_and_the_embedded_runner(world):
    entries = {entry.task: entry for entry in load_schedule()}
    assert "retention.tasks.purge_expired_records" in entries
    w = world()
    assert tasks.purge_expired_records()["runs"] == 1
    assert not Run.objects.filter(pk=w.run.pk).exists()


def test_the_rule_is_one_queryset(world, acme, agent):
    gone = world()
    open_run(tenant=acme, agent=agent)
    assert list(expired_runs().values_list("pk", flat=True)) == [gone.run.pk]


def test_an_old_closed_runs_kept_results_go_with_it(world):
    w = world(calls=1)
    kept = keep_full_result(run_id=str(w.run.pk), call_id="c1", skill_name="mail.inbox", content=[1, 2, 3])

    purge_expired_records()

    assert not StoredResult.objects.filter(pk=kept).exists()
