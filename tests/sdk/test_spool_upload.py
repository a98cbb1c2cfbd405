"""The SDK uploads its spool to a live Airlock once it answers again: nothing lost, nothing twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from airlock_sdk import Airlock, ClientSkillRegistry, TransportError
from airlock_sdk.spool import Spool

from runs.models import LocalDecision, ToolCall
from tests.sdk.test_live import Switchable
from traces.models import Span


@pytest.fixture
def switch() -> Switchable:
    return Switchable()


@pytest.fixture
def airlock(asgi_live_server, catalog, agent_and_key, switch, tmp_path) -> Airlock:
    client = Airlock(
        asgi_live_server.url,
        agent_and_key[1],
        cache_dir=tmp_path / "cache",
        retries=1,
        client_skills=ClientSkillRegistry(),
        http_client=httpx.Client(transport=switch, timeout=40),
        spool_path=tmp_path / "spool.sqlite3",
    )
    yield client
    client.close()


@pytest.fixture
def spool(airlock) -> Spool:
    assert airlock.refresh_bundle().number == 1  # the bundle the calls below are decided under
    return airlock.spool


def decide_locally(
    spool: Spool, run_id: str, call_id: str, *, at: datetime, skill="workspace.read_local_notes", done=True
):
    spool.record_decision(
        call_id=call_id,
        run_id=run_id,
        skill=skill,
        version="1.0.0",
        arguments={"customer_id": "c-100"},
        verdict="allow",
        reason="bundle allows workspace.*",
        bundle_number=1,
        decided_at=at,
    )
    if done:
        spool.record_result(
            call_id, status="succeeded", result={"notes": ["vip"]}, finished_at=at + timedelta(milliseconds=5)
        )


def test_the_spool_waits_while_airlock_is_down_and_goes_up_on_the_next_answer(airlock, spool, switch):
    run = airlock.start_run(end_user="u-1", task="outage")
    start = datetime.now(UTC)
    decide_locally(spool, run.run_id, "s-1", at=start)
    decide_locally(spool, run.run_id, "s-2", at=start + timedelta(milliseconds=20))
    decide_locally(spool, run.run_id, "s-running", at=start + timedelta(milliseconds=40), done=False)
    switch.down = True
    report = airlock.flush_spool()
    assert report.recorded == [] and report.errors and report.pending == 3
    with pytest.raises(TransportError):
        airlock.tools()  # no cache yet for this format: the outage is felt
    switch.down = False
    airlock.get_run(run.run_id)  # the first answer after the outage uploads the spool by itself
    assert [c.call_id for c in spool.pending()] == ["s-running"]  # still running: held back
    calls = ToolCall.objects.filter(run_id=run.run_id).order_by("created_at")
    assert [c.call_id for c in calls] == ["s-1", "s-2"]
    assert LocalDecision.objects.filter(call__run_id=run.run_id, bundle_number=1).count() == 2
    assert Span.objects.filter(call__run_id=run.run_id).count() == 2


def test_a_lost_answer_keeps_the_calls_pending_and_the_resend_records_them_once(airlock, spool, switch):
    run = airlock.start_run(end_user="u-1", task="outage")
    decide_locally(spool, run.run_id, "s-1", at=datetime.now(UTC))
    switch.lose_answers = 2  # the upload and its one retry both lose their answers
    report = airlock.flush_spool()
    assert report.errors and [c.call_id for c in spool.pending()] == ["s-1"]
    assert airlock.flush_spool().recorded == ["s-1"]
    assert spool.pending() == []
    assert ToolCall.objects.filter(run_id=run.run_id, call_id="s-1").count() == 1
    assert Span.objects.filter(call__run_id=run.run_id).count() == 1


def test_uploading_the_same_spool_twice_is_harmless(airlock, spool, tmp_path, asgi_live_server, agent_and_key):
    run = airlock.start_run(end_user="u-1", task="outage")
    decide_locally(spool, run.run_id, "s-1", at=datetime.now(UTC))
    assert airlock.flush_spool().recorded == ["s-1"]
    copy = Spool(tmp_path / "copy.sqlite3")  # another process with the same spool content
    decide_locally(copy, run.run_id, "s-1", at=spool.get("s-1").decided_at)
    copy.close()
    with Airlock(
        asgi_live_server.url, agent_and_key[1], use_cache=False, spool_path=tmp_path / "copy.sqlite3"
    ) as second:
        report = second.flush_spool()
    assert report.recorded == ["s-1"] and report.refused == []
    assert ToolCall.objects.filter(run_id=run.run_id).count() == 1


def test_large_spools_go_in_batches_and_refused_calls_are_reported_not_resent(airlock, spool):
    run = airlock.start_run(end_user="u-1", task="outage")
    start = datetime.now(UTC) - timedelta(seconds=10)
    for i in range(120):
        decide_locally(spool, run.run_id, f"s-{i:03}", at=start + timedelta(milliseconds=i))
    decide_locally(spool, run.run_id, "forged", at=start + timedelta(seconds=1), skill="customer.list_orders")
    report = airlock.flush_spool()
    assert len(report.recorded) == 120 and report.pending == 0
    assert [r["call_id"] for r in report.refused] == ["forged"]
    assert report.refused[0]["error"]["code"] == "not_client_executed"
    assert ToolCall.objects.filter(run_id=run.run_id).count() == 120


def test_a_call_decided_long_ago_without_a_result_is_uploaded_as_unknown(airlock, spool):
    run = airlock.start_run(end_user="u-1", task="outage")
    decide_locally(spool, run.run_id, "s-dead", at=datetime.now(UTC), done=False)
    airlock.uploader.unfinished_grace = 0  # its process is presumed dead
    assert airlock.flush_spool().recorded == ["s-dead"]
    assert ToolCall.objects.get(run_id=run.run_id).result["error"]["code"] == "local_outcome_unknown"
