"""The spool of locally decided calls, as a crash and a race would test it."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime

import pytest
from airlock_sdk.spool import Spool


def decide(spool: Spool, call_id: str, **overrides) -> None:
    values = {
        "call_id": call_id,
        "run_id": "run-1",
        "skill": "files.read_local",
        "version": "1.0.0",
        "arguments": {"path": "/tmp/a", "n": 1},
        "verdict": "allow",
        "reason": "granted by role",
        "bundle_number": 7,
        "decided_at": datetime.now(UTC),
    }
    spool.record_decision(**(values | overrides))


def test_a_decision_and_its_result_come_back_in_order(tmp_path):
    spool = Spool(tmp_path / "spool.sqlite")
    decide(spool, "c-2")
    decide(spool, "c-1", arguments={"path": "/etc/x"})
    finished = datetime.now(UTC)
    spool.record_result("c-2", status="succeeded", result={"lines": ["a"]}, finished_at=finished)

    first, second = spool.pending()
    assert [first.call_id, second.call_id] == ["c-2", "c-1"]  # decision order, not call id order
    assert first.status == "succeeded" and first.result == {"lines": ["a"]} and first.finished_at == finished
    assert first.bundle_number == 7 and first.decided_at.tzinfo is not None
    assert second.status == "decided" and second.result is None and second.arguments == {"path": "/etc/x"}
    assert first.sequence < second.sequence


def test_uploaded_calls_leave_pending_and_a_replayed_decision_changes_nothing(tmp_path):
    spool = Spool(tmp_path / "spool.sqlite")
    decide(spool, "c-1")
    decide(spool, "c-1", verdict="deny", reason="forged second decision")
    assert [(c.verdict, c.reason) for c in spool.pending()] == [("allow", "granted by role")]
    spool.mark_uploaded(["c-1"])
    assert spool.pending() == []
    assert Spool(tmp_path / "spool.sqlite").pending() == []


def test_a_second_result_cannot_overwrite_the_first(tmp_path):
    spool = Spool(tmp_path / "spool.sqlite")
    decide(spool, "c-1")
    spool.record_result("c-1", status="failed", error={"message": "boom"}, finished_at=datetime.now(UTC))
    spool.record_result("c-1", status="succeeded", result="forged", finished_at=datetime.now(UTC))
    (call,) = spool.pending()
    assert call.status == "failed" and call.error == {"message": "boom"} and call.result is None


def test_a_result_needs_a_decision_and_a_final_status(tmp_path):
    spool = Spool(tmp_path / "spool.sqlite")
    with pytest.raises(KeyError, match="No decision"):
        spool.record_result("never-decided", status="succeeded", finished_at=datetime.now(UTC))
    decide(spool, "c-1")
    with pytest.raises(ValueError, match="succeeded"):
        spool.record_result("c-1", status="decided", finished_at=datetime.now(UTC))


def test_a_process_killed_after_the_decision_leaves_it_readable(tmp_path):
    """The agent's process records a decision, starts the tool and is SIGKILLed: no result, no close,
    no flush. A new process still reads the decision."""
    path = tmp_path / "spool.sqlite"
    child = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from datetime import UTC, datetime
        from airlock_sdk.spool import Spool
        spool = Spool({str(path)!r})
        for n in range(3):
            spool.record_decision(
                call_id=f"c-{{n}}", run_id="run-1", skill="files.read_local", version="1.0.0",
                arguments={{"n": n}}, verdict="allow", reason="granted by role", bundle_number=4,
                decided_at=datetime.now(UTC),
            )
        spool.record_result("c-0", status="succeeded", result=0, finished_at=datetime.now(UTC))
        sys.stdout.write("decided\\n"); sys.stdout.flush()
        time.sleep(60)  # the tool "runs" here when the process is killed
        """
    )
    process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "decided"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL

    reader = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from airlock_sdk.spool import Spool; "
            f"print([(c.call_id, c.status) for c in Spool({str(path)!r}).pending()])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert reader.stdout.strip() == "[('c-0', 'succeeded'), ('c-1', 'decided'), ('c-2', 'decided')]"


def test_two_threads_recording_at_once_lose_nothing(tmp_path):
    spool = Spool(tmp_path / "spool.sqlite")
    other = Spool(tmp_path / "spool.sqlite")  # a second connection too, as a second process would hold
    start = threading.Barrier(2)

    def record(which: Spool, prefix: str) -> None:
        start.wait()
        for n in range(200):
            decide(which, f"{prefix}-{n}")
            which.record_result(f"{prefix}-{n}", status="succeeded", result=n, finished_at=datetime.now(UTC))

    threads = [threading.Thread(target=record, args=(spool, "a")), threading.Thread(target=record, args=(other, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    calls = Spool(tmp_path / "spool.sqlite").pending()
    assert len(calls) == 400 and {c.status for c in calls} == {"succeeded"}
    assert [c.sequence for c in calls] == sorted(c.sequence for c in calls)
    for prefix in "ab":  # each thread's calls stay in its own order
        own = [c.result for c in calls if c.call_id.startswith(prefix)]
        assert own == list(range(200))
