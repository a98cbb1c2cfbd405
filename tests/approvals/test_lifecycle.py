"""approvals.lifecycle is the one owner of an approval request's state: nothing else writes it, every move
outside the machine is refused, and every move inside it wins once."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from approvals import lifecycle
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.approvals.factories import open_request

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "approvals" / "lifecycle.py"
WRITE_METHODS = {"update", "create", "bulk_update", "get_or_create", "update_or_create"}
STATES = set(ApprovalStatus.values)
EDGES = {(source, to) for source, targets in lifecycle.APPROVAL_MACHINE.items() if source for to in targets}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _stray_writes(path: Path) -> list[str]:
    """Assignments of an ApprovalStatus to `.status`, and `status=` in a write on ApprovalRequest or with an
    ApprovalStatus value."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (
                any(isinstance(t, ast.Attribute) and t.attr == "status" for t in targets)
                and node.value is not None
                and "ApprovalStatus" in _names(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} assigns an approval status")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            status = [k for k in node.keywords if k.arg == "status"]
            if status and ("ApprovalStatus" in _names(status[0].value) or _root_name(node.func) == "ApprovalRequest"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} writes status through .{node.func.attr}()")
    return found


def _project_files() -> list[Path]:
    skip = {".venv", "tests", "migrations", "sdk", "node_modules", "bench"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts) and p != OWNER]


def test_nothing_but_approvals_lifecycle_writes_a_request_status():
    stray = [line for path in _project_files() for line in _stray_writes(path)]
    assert stray == [], "Move these through approvals.lifecycle:\n" + "\n".join(stray)


def test_the_scan_finds_a_stray_write():
    sample = ROOT / "approvals" / "_lifecycle_scan_sample.py"
    sample.write_text(
        "from approvals.models import ApprovalRequest, ApprovalStatus\n"
        "def sneak(approval):\n"
        "    approval.status = ApprovalStatus.EXECUTED\n"
        "    ApprovalRequest.objects.filter(pk=approval.pk).update(status='approved')\n"
    )
    try:
        assert len(_stray_writes(sample)) == 2
    finally:
        sample.unlink()


def test_every_state_is_reachable_and_final_states_are_final():
    assert set().union(*lifecycle.APPROVAL_MACHINE.values()) == STATES
    assert lifecycle.first_status() == ApprovalStatus.PENDING
    for final in lifecycle.APPROVAL_FINAL:
        assert final not in lifecycle.APPROVAL_MACHINE  # an outcome never moves again
    assert set(lifecycle.APPROVAL_MACHINE) - {None} | lifecycle.APPROVAL_FINAL == STATES


def _in_state(approval: ApprovalRequest, status: str) -> ApprovalRequest:
    """Put the row in `status` for the test (as if the machine had brought it there)."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(status=status, completed_at=None, scheduled_for=None)
    approval.refresh_from_db()
    return approval


@pytest.fixture
def approval(db, acme, agent):
    return open_request(tenant=acme, agent=agent)


@pytest.mark.parametrize(("source", "to"), sorted((s, t) for s in STATES for t in STATES if (s, t) not in EDGES))
def test_every_move_outside_the_machine_is_refused(approval, source, to):
    _in_state(approval, source)
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.move_approval(approval, to=to, only_from={source})
    assert ApprovalRequest.objects.get(pk=approval.pk).status == source


@pytest.mark.parametrize(("source", "to"), sorted(EDGES))
def test_every_move_of_the_machine_wins_once(approval, source, to):
    _in_state(approval, source)
    stale = ApprovalRequest.objects.get(pk=approval.pk)  # a second worker's copy, read before the move
    assert lifecycle.move_approval(approval, to=to, only_from={source}) is True
    assert approval.status == to == ApprovalRequest.objects.get(pk=approval.pk).status
    if to != source:
        assert lifecycle.move_approval(stale, to=to, only_from={source}) is False  # the racing caller loses
        assert stale.status == source  # and its copy is not touched


def test_named_moves_keep_to_their_sources(approval):
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.decide(approval, to=ApprovalStatus.EXECUTED, now=timezone.now())
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.close_pending(approval, to=ApprovalStatus.APPROVED)
    with pytest.raises(lifecycle.IllegalTransition):
        lifecycle.complete_refused(approval, outcome={})  # pending is no refusal
    assert lifecycle.cancel_scheduled(approval) is False  # pending, not scheduled: no move
    assert lifecycle.finish(approval, to=ApprovalStatus.EXECUTED) is False


def test_a_decision_after_the_expiry_moves_nothing(approval):
    later = approval.expires_at + timedelta(seconds=1)
    assert lifecycle.decide(approval, to=ApprovalStatus.APPROVED, now=later) is False
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING


def test_a_scheduled_call_is_claimed_only_once_its_window_is_over(approval, clock):
    _in_state(approval, ApprovalStatus.APPROVED)
    assert lifecycle.schedule(approval, runs_at=clock.now() + timedelta(seconds=30)) is True
    assert lifecycle.claim_execution(approval) is False  # too early
    clock.advance(31)
    assert lifecycle.claim_execution(approval) is True
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXECUTING and approval.resume_attempts == 1
    assert lifecycle.cancel_scheduled(approval) is False  # too late to take back


def test_the_architecture_page_shows_the_approval_machine_as_the_code_defines_it():
    page = (ROOT / "docs" / "architecture.md").read_text()
    shown = page.split("<!-- approval-lifecycle:start -->")[1].split("<!-- approval-lifecycle:end -->")[0].strip()
    assert shown == lifecycle.describe()
