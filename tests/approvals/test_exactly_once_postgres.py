"""Exactly-once execution of approved calls on PostgreSQL: concurrent deliveries of one resume, a worker
SIGKILLed after the side effect, and expired leases, counted at the downstream's own ledger
(tests/approvals/exactly_once_tools.py), behind the real gate, claim, executor and adapter.

The broker is played by the test: a decision's on-commit enqueue is recorded (`broker`), and the test
delivers the resume as often, as concurrently and in whatever process it wants.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalStatus
from approvals.services import decide_approval, raw_arguments, resume_approval
from approvals.tasks import resume_call
from registry.snapshots import publish_snapshot
from reliability.models import ReconciliationItem, ReconciliationReason, ReconciliationStatus
from runs import lifecycle
from runs.execution import timeout_of
from runs.models import CallStatus, RunEvent, ToolCall
from runs.services import CallHeldElsewhere, execute_approved_call, settle_expired_leases
from tests.approvals import exactly_once_tools as downstream
from tests.approvals.gate_world import create_active_version
from tests.runs.conftest import post_calls, start_run
from tests.runs.factories import grant, manifest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CHARGE = "billing.charge_card"  # a write the downstream does not deduplicate
SYNC = "billing.sync_invoice"  # a write the manifest declares idempotent
SCHEMA = {
    "type": "object",
    "properties": {"customer_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["customer_id", "amount_cents"],
    "additionalProperties": False,
}
ARGUMENTS = {"customer_id": "c-9", "amount_cents": 4200}
WORKER = (
    "import sys, django; django.setup(); from tests.approvals.exactly_once_tools import resume_main; "
    "resume_main(int(sys.argv[1]))"
)


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch):
    monkeypatch.setenv(downstream.LEDGER_ENV, str(tmp_path / "charges.jsonl"))
    monkeypatch.delenv(downstream.DIE_ENV, raising=False)
    downstream.reset()
    yield
    downstream.reset()


@pytest.fixture
def world(acme) -> None:
    for name, idempotent in ((CHARGE, False), (SYNC, True)):
        body = manifest(
            name, effect="external", approval="required", schema=SCHEMA, adapter="python:exactly_once.charge"
        )
        if idempotent:
            body["execution"]["idempotent"] = True
        create_active_version(body, publish=False)
    grant(acme, "billing.*")
    publish_snapshot(reason="exactly-once world")


@pytest.fixture
def broker(monkeypatch) -> list[int]:
    """The resume task's queue: what decisions enqueued (after their commit), delivered by the test."""
    queued: list[int] = []
    monkeypatch.setattr(
        resume_call, "delay_on_commit", lambda approval_id: transaction.on_commit(lambda: queued.append(approval_id))
    )
    return queued


@pytest.fixture
def worker_env() -> dict[str, str]:
    """A worker process on the same test database, whose downstream dies right after its effect."""
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"postgres://{database['USER']}{password}@{database['HOST']}:{database['PORT']}/"
        f"{database['NAME']}",
        downstream.LEDGER_ENV: str(downstream.ledger_path()),
        downstream.DIE_ENV: "1",
    }


def _approved_through_gate(agent_client, approver, broker: list[int], skill: str) -> ApprovalRequest:
    """An agent's call paused by the real gate, approved by a person; its resume is queued, not run."""
    run = start_run(agent_client)
    [result] = post_calls(
        agent_client, run["run_id"], [{"call_id": "pay-1", "name": skill, "arguments": ARGUMENTS}]
    ).json()["results"]
    assert result["status"] == "approval_required", result
    approval = ApprovalRequest.objects.get(pk=result["approval_id"])
    decide_approval(approval=approval, user=approver, decision="approve")
    assert broker == [approval.pk]
    approval = ApprovalRequest.objects.select_related("call__run").get(pk=approval.pk)
    assert approval.status == ApprovalStatus.APPROVED and approval.call.status == CallStatus.AWAITING_APPROVAL
    return approval


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _concurrently(action: Callable[[], Any], times: int, hold: downstream.Hold) -> list:
    """Run `action` in `times` threads released at once; the one that reaches the downstream is held
    there until every other has finished, so they all overlap the execution in flight."""
    barrier = threading.Barrier(times)
    outcomes: list = [None] * times

    def attempt(index: int) -> None:
        try:
            barrier.wait()
            outcomes[index] = action()
        except Exception as exc:  # noqa: BLE001 - CallHeldElsewhere is expected; anything else fails the test
            outcomes[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(times)]
    for thread in threads:
        thread.start()
    try:
        assert hold.arrived.wait(downstream.HOLD_LIMIT_S), "no attempt reached the downstream"
        _wait_for(lambda: sum(o is not None for o in outcomes) >= times - 1, 15)
    finally:
        hold.release.set()
        for thread in threads:
            thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def _deliver_in_worker(approval_id: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WORKER, str(approval_id)],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _expire_lease(call: ToolCall) -> None:
    """Test setup of the clock: the worker holding the call stopped renewing long enough ago."""
    assert (
        ToolCall.objects.filter(pk=call.pk, status=CallStatus.EXECUTING).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        == 1
    )


def _open_items(call: ToolCall):
    return ReconciliationItem.objects.filter(
        call=call, reason=ReconciliationReason.TIMEOUT, status=ReconciliationStatus.OPEN
    )


def test_ten_concurrent_deliveries_of_one_resume_execute_once(agent_client, approver, world, broker):
    approval = _approved_through_gate(agent_client, approver, broker, CHARGE)

    outcomes = _concurrently(lambda: resume_approval(approval_id=approval.pk).status, 10, downstream.hold_next())
    assert outcomes.count(ApprovalStatus.EXECUTED) == 1, outcomes
    assert sum(isinstance(o, CallHeldElsewhere) for o in outcomes) == 9, outcomes
    assert resume_approval(approval_id=approval.pk).status == ApprovalStatus.EXECUTED  # the retry, later

    [charged] = downstream.executions()
    call = ToolCall.objects.get(pk=approval.call_id)
    assert charged["key"] == call.idempotency_key and call.idempotency_key
    assert call.status == CallStatus.SUCCEEDED and call.lease_expires_at is None
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED
    assert approval.outcome["content"]["charge_id"] == charged["charge_id"]
    assert ApprovalEvent.objects.filter(request=approval, action="executing").count() == 1
    assert ApprovalEvent.objects.filter(request=approval, action=ApprovalStatus.EXECUTED).count() == 1
    assert RunEvent.objects.filter(run=call.run, kind="call.completed").count() == 1


def test_worker_killed_after_the_effect_is_never_executed_again(agent_client, approver, world, broker, worker_env):
    approval = _approved_through_gate(agent_client, approver, broker, CHARGE)

    first = _deliver_in_worker(approval.pk, worker_env)
    assert first.returncode == -signal.SIGKILL, first.stderr
    [charged] = downstream.executions()
    assert charged["pid"] != os.getpid()
    approval.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.call_id)
    assert approval.status == ApprovalStatus.EXECUTING and approval.completed_at is None
    assert call.status == CallStatus.EXECUTING and call.lease_expires_at > timezone.now()

    with pytest.raises(CallHeldElsewhere):  # redelivered while the dead worker's lease still runs
        resume_approval(approval_id=approval.pk)
    assert len(downstream.executions()) == 1 and not _open_items(call).exists()

    _expire_lease(call)
    second = _deliver_in_worker(approval.pk, worker_env)  # it would die again if it charged again
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["status"] == ApprovalStatus.FAILED
    resume_approval(approval_id=approval.pk)  # and once more, as a late retry would

    assert len(downstream.executions()) == 1
    call.refresh_from_db()
    assert call.status == CallStatus.TIMEOUT_UNKNOWN and call.result["error"]["code"] == "lease_expired"
    assert _open_items(call).count() == 1
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED and approval.completed_at is not None
    assert approval.outcome["error"]["class"] == "timeout_unknown"
    assert RunEvent.objects.filter(run=call.run, kind="call.completed").count() == 1


def test_expired_lease_on_a_write_opens_reconciliation(agent_client, approver, world, broker):
    approval = _approved_through_gate(agent_client, approver, broker, CHARGE)
    call = approval.call
    assert lifecycle.claim_approved(call, timeout_s=timeout_of(call.skill_version.manifest))
    _expire_lease(call)

    assert settle_expired_leases() == 0  # within the grace, a re-delivery may still take it over
    assert settle_expired_leases(grace=timedelta(0)) == 1

    call.refresh_from_db()
    assert call.status == CallStatus.TIMEOUT_UNKNOWN and call.lease_expires_at is None
    assert _open_items(call).count() == 1
    assert downstream.executions() == []
    resume_approval(approval_id=broker[0])  # the queued resume arrives after all: it must not run the call
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED and approval.outcome["error"]["class"] == "timeout_unknown"
    assert downstream.executions() == [] and _open_items(call).count() == 1


def test_expired_lease_on_an_idempotent_skill_reruns_once(agent_client, approver, world, broker):
    approval = _approved_through_gate(agent_client, approver, broker, SYNC)
    call = approval.call
    arguments = raw_arguments(call)
    assert lifecycle.claim_approved(call, timeout_s=timeout_of(call.skill_version.manifest))
    _expire_lease(call)

    outcomes = _concurrently(lambda: execute_approved_call(call=call, arguments=arguments), 2, downstream.hold_next())
    [result] = [o for o in outcomes if isinstance(o, dict)]
    assert result["status"] == "ok", outcomes
    assert sum(isinstance(o, CallHeldElsewhere) for o in outcomes) == 1, outcomes

    [charged] = downstream.executions()
    call.refresh_from_db()
    assert charged["key"] == call.idempotency_key and call.idempotency_key  # the same key as the first try
    assert call.status == CallStatus.SUCCEEDED and result["content"]["charge_id"] == charged["charge_id"]
    assert not _open_items(call).exists()
    resume_approval(approval_id=broker[0])
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTED and approval.outcome["content"] == result["content"]
    assert len(downstream.executions()) == 1


def test_of_two_workers_that_saw_the_lease_expire_one_reclaims(agent_client, approver, world, broker):
    approval = _approved_through_gate(agent_client, approver, broker, SYNC)
    timeout_s = timeout_of(approval.call.skill_version.manifest)
    assert lifecycle.claim_approved(approval.call, timeout_s=timeout_s)
    _expire_lease(approval.call)
    # Both read the call while its lease had run out, then race to take it over.
    seen = [ToolCall.objects.get(pk=approval.call_id) for _ in range(2)]
    assert all(lifecycle.lease_expired(call) for call in seen)
    barrier = threading.Barrier(2)
    won: list = [None, None]

    def reclaim(index: int) -> None:
        try:
            barrier.wait()
            won[index] = lifecycle.reclaim_expired(seen[index], timeout_s=timeout_s)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reclaim, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(won) == [False, True]
    with pytest.raises(CallHeldElsewhere):  # the winner's fresh lease now keeps everyone else out
        execute_approved_call(call=approval.call, arguments=raw_arguments(approval.call))
    assert downstream.executions() == []


def test_a_lost_resume_is_found_by_the_sweep_and_records_the_settled_outcome(agent_client, approver, world, broker):
    from approvals.services import resume_orphaned_approvals

    approval = _approved_through_gate(agent_client, approver, broker, CHARGE)  # its resume task is lost
    call = approval.call
    assert lifecycle.claim_approved(call, timeout_s=timeout_of(call.skill_version.manifest))
    _expire_lease(call)
    assert settle_expired_leases(grace=timedelta(0)) == 1
    assert resume_orphaned_approvals() == 1  # beat: the approval's call is final, its outcome not recorded
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.FAILED and approval.outcome["error"]["class"] == "timeout_unknown"
    assert RunEvent.objects.filter(run=call.run, kind="call.completed").count() == 1
    assert resume_orphaned_approvals() == 0 and downstream.executions() == []
