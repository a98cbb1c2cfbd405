"""runs.lifecycle is the one owner of call and run state: the code base has no stray writes, and
each transition moves a row only from the states its machine allows, once."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from runs import lifecycle
from runs.models import CallStatus, RunStatus, ToolCall
from tests.runs.factories import make_skill, run_for

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "runs" / "lifecycle.py"
STATE_ENUMS = {"CallStatus", "RunStatus"}
STATE_MODELS = {"ToolCall", "Run"}
WRITE_METHODS = {"update", "create", "bulk_update", "get_or_create", "update_or_create"}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _stray_writes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [t for target in targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            writes_status = any(isinstance(t, ast.Attribute) and t.attr == "status" for t in flat)
            if writes_status and node.value is not None and _names(node.value) & STATE_ENUMS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} assigns a call/run status")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            status_kw = [k for k in node.keywords if k.arg == "status"]
            if status_kw and (_names(status_kw[0].value) & STATE_ENUMS or _root_name(node.func) in STATE_MODELS):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} writes status through .{node.func.attr}()")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save":
            for keyword in node.keywords:
                receiver = _root_name(node.func).lower()
                if (
                    keyword.arg == "update_fields"
                    and "status" in ast.unparse(keyword.value)
                    and ("call" in receiver or "run" in receiver or receiver == "locked")
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} saves status with update_fields")
    return found


def _project_files() -> list[Path]:
    skip = {".venv", "tests", "migrations", "sdk", "node_modules", "bench"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts) and p != OWNER]


def test_nothing_but_runs_lifecycle_writes_call_or_run_status():
    stray = [line for path in _project_files() for line in _stray_writes(path)]
    assert stray == [], "Move these through runs.lifecycle:\n" + "\n".join(stray)


def test_the_scan_finds_a_stray_write(tmp_path):
    sample = ROOT / "runs" / "_lifecycle_scan_sample.py"
    sample.write_text(
        "from runs.models import CallStatus, ToolCall\n"
        "def sneak(call):\n"
        "    call.status, call.error_class = CallStatus.SUCCEEDED, ''\n"
        "    ToolCall.objects.filter(pk=call.pk).update(status='failed')\n"
    )
    try:
        assert len(_stray_writes(sample)) == 2
    finally:
        sample.unlink()


def test_every_state_is_reachable_and_final_states_are_final():
    reachable = set().union(*lifecycle.CALL_MACHINE.values())
    assert reachable | {CallStatus.PROPOSED} == set(CallStatus.values)
    assert set().union(*lifecycle.RUN_MACHINE.values()) == set(RunStatus.values)
    for closed in lifecycle.RUN_CLOSED:
        assert closed not in lifecycle.RUN_MACHINE  # a closed run never moves again


@pytest.fixture
def call(db, acme, agent):
    make_skill("billing.refund", effect="write")
    call = ToolCall(run=run_for(agent), call_id="c1", name="billing.refund")
    lifecycle.first_status(call, CallStatus.AWAITING_APPROVAL)
    call.save()
    return call


def test_a_claim_is_won_once(call):
    first, second = ToolCall.objects.get(pk=call.pk), ToolCall.objects.get(pk=call.pk)
    assert lifecycle.claim_approved(first, timeout_s=5) is True
    assert lifecycle.claim_approved(second, timeout_s=5) is False  # the racing worker loses
    assert lifecycle.reclaim_expired(second, timeout_s=5) is False  # its lease is live
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lifecycle.reclaim_expired(second, timeout_s=5) is True
    assert lifecycle.reclaim_expired(first, timeout_s=5) is False  # only one taker of an expired lease


def test_moves_outside_the_machine_are_refused(call):
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.move_call(call, to=CallStatus.RECONCILED, only_from={CallStatus.AWAITING_APPROVAL})
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.first_status(call, CallStatus.SUCCEEDED)  # already stored
    assert lifecycle.finish_execution(call, status=CallStatus.SUCCEEDED) is False  # not executing: no move
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_APPROVAL


def test_a_closed_run_stays_closed(db, acme, agent):
    make_skill("billing.refund", effect="write")
    run = run_for(agent)
    assert lifecycle.close_run(run, status=RunStatus.COMPLETED) is True
    assert lifecycle.move_run(run, to=RunStatus.RUNNING) is False
    assert lifecycle.close_run(run, status=RunStatus.CANCELLED) is False
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def test_the_architecture_page_shows_the_machines_as_the_code_defines_them():
    page = (ROOT / "docs" / "architecture.md").read_text()
    shown = page.split("<!-- lifecycle:start -->")[1].split("<!-- lifecycle:end -->")[0].strip()
    assert shown == lifecycle.describe()
