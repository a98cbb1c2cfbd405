"""Execution of allowed calls: order, concurrency, idempotency, taint, shaping, timeouts, rate limits."""

import threading
import time

import pytest
from django.urls import reverse

from policies.models import PolicyVersion
from runs import demo_tools
from runs.adapters.python import register
from runs.models import CallStatus, IdempotencyRecord, Run, ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill, published_policy, rule

pytestmark = pytest.mark.django_db

READS_IN_BATCH = 4
_barrier = threading.Barrier(READS_IN_BATCH, timeout=5)
_active_writes = []
_write_log: list[str] = []


@register("test.rendezvous", effect="read")
def rendezvous(*, arguments, context):
    # Returns only when all reads of the batch are inside their adapters at once: proof of overlap.
    _barrier.wait()
    return {"read": arguments.get("n")}


@register("test.exclusive_write", effect="read")
def exclusive_write(*, arguments, context):
    _active_writes.append(context.call_id)
    overlapping = len(_active_writes) > 1
    _write_log.append(context.call_id)
    _active_writes.remove(context.call_id)
    return {"wrote": arguments.get("n"), "overlapped": overlapping}


@register("test.slow", effect="read")
def slow(*, arguments, context):
    time.sleep(arguments.get("seconds", 1))
    return {"done": True}


@register("test.big", effect="read")
def big(*, arguments, context):
    return {"items": [{"n": i, "text": "x" * 40} for i in range(200)], "next_cursor": None}


@pytest.fixture
def skills(acme):
    made = {
        "read": make_skill("orders.rendezvous", adapter="python:test.rendezvous", publish=False),
        "write": make_skill(
            "orders.exclusive_write", effect="write", adapter="python:test.exclusive_write", publish=False
        ),
        "slow_read": make_skill("orders.slow_read", adapter="python:test.slow", timeout_ms=200, publish=False),
        "slow_write": make_skill(
            "orders.slow_write", effect="write", adapter="python:test.slow", timeout_ms=200, publish=False
        ),
        "big": make_skill("orders.big", adapter="python:test.big", result_limit_bytes=1024, publish=False),
        "inbox": make_skill("support.read_inbox", adapter="python:test.echo", untrusted_output=True, publish=False),
    }
    grant(acme, "orders.*")
    grant(acme, "support.*")
    make_skill("orders.echo_write", effect="write", adapter="python:test.echo")
    return made


def test_mixed_batch_reads_overlap_writes_sequential_results_in_order(agent_client, skills):
    _write_log.clear()
    calls = []
    for i in range(READS_IN_BATCH):
        calls.append(call(f"r{i}", "orders.rendezvous", {"n": i}))
        calls.append(call(f"w{i}", "orders.exclusive_write", {"n": i}))
    run = start_run(agent_client)
    body = post_calls(agent_client, run["run_id"], calls).json()
    assert [r["call_id"] for r in body["results"]] == [c["call_id"] for c in calls]
    assert [r["status"] for r in body["results"]] == ["ok"] * len(calls), body["results"]
    reads = list(ToolCall.objects.filter(call_id__startswith="r"))
    writes = sorted(ToolCall.objects.filter(call_id__startswith="w"), key=lambda c: c.started_at)
    # Reads: every one started before any finished (they overlapped in time).
    assert max(c.started_at for c in reads) <= min(c.finished_at for c in reads)
    # Writes: each started after the previous one finished, in the order given.
    assert [c.call_id for c in writes] == ["w0", "w1", "w2", "w3"] == _write_log
    for earlier, later in zip(writes, writes[1:], strict=False):
        assert earlier.finished_at <= later.started_at
    assert not any(r["content"].get("overlapped") for r in body["results"] if r["call_id"].startswith("w"))


def test_idempotent_replay_returns_recorded_outcome_without_executing(agent_client, skills, acme):
    make_skill("billing.create_refund_request", effect="write", adapter="python:demo.create_refund_request")
    grant(acme, "billing.*")
    arguments = {"order_id": "ord_5001", "amount_cents": 500, "currency": "EUR", "reason_code": "damaged"}
    first_run = start_run(agent_client)
    first = post_calls(
        agent_client,
        first_run["run_id"],
        [call("c1", "billing.create_refund_request", arguments, idempotency_key="refund-ord_5001")],
    ).json()
    second_run = start_run(agent_client)
    second = post_calls(
        agent_client,
        second_run["run_id"],
        [call("c9", "billing.create_refund_request", arguments, idempotency_key="refund-ord_5001")],
    ).json()
    assert (
        first["results"][0]["content"]
        == second["results"][0]["content"]
        == {"refund_request_id": "rr_0001", "status": "pending"}
    )
    assert second["results"][0]["call_id"] == "c9"
    assert len(demo_tools.refunds()) == 1
    assert IdempotencyRecord.objects.get(key="refund-ord_5001").outcome["content"]["refund_request_id"] == "rr_0001"


def test_key_reuse_with_other_arguments_is_validation_error(agent_client, skills):
    run = start_run(agent_client)
    post_calls(agent_client, run["run_id"], [call("c1", "orders.echo_write", {"a": 1}, idempotency_key="k1")])
    body = post_calls(
        agent_client, run["run_id"], [call("c2", "orders.echo_write", {"a": 2}, idempotency_key="k1")]
    ).json()
    assert body["results"][0]["error"]["class"] == "validation"
    assert body["results"][0]["error"]["code"] == "idempotency_key_reused"


def test_mutating_call_gets_run_and_call_id_as_default_key(agent_client, skills):
    run = start_run(agent_client)
    post_calls(agent_client, run["run_id"], [call("c1", "orders.echo_write", {"a": 1})])
    assert ToolCall.objects.get(call_id="c1").idempotency_key == f"{run['run_id']}:c1"
    again = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo_write", {"a": 1})]).json()
    assert again["results"][0]["status"] == "ok" and "Replayed" in again["results"][0]["warnings"][-1]
    other = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo_write", {"a": 2})]).json()
    assert other["results"][0]["error"]["code"] == "duplicate_call_id"


@pytest.mark.parametrize("mark", [True, "read inbound email from a stranger"])
def test_agent_taint_flips_later_write_to_confirm(agent_client, skills, mark):
    run = start_run(agent_client)
    body = post_calls(
        agent_client,
        run["run_id"],
        [
            call("c1", "orders.echo_write", {"a": 1}),
            call("c2", "orders.echo_write", {"a": 2}, taint=mark),
        ],
    ).json()
    assert [r["status"] for r in body["results"]] == ["ok", "approval_required"]
    assert body["tainted"] is True
    stored = Run.objects.get(pk=run["run_id"])
    assert stored.tainted and (stored.taint_source == mark if isinstance(mark, str) else "c2" in stored.taint_source)
    assert ToolCall.objects.get(call_id="c2").decision["rule_id"] == "default:write_tainted"


def test_untrusted_output_taints_the_run_and_later_writes(agent_client, skills):
    run = start_run(agent_client)
    body = post_calls(
        agent_client,
        run["run_id"],
        [call("c1", "support.read_inbox", {"ticket": "t"}), call("c2", "orders.echo_write", {"a": 1})],
    ).json()
    assert [r["status"] for r in body["results"]] == ["ok", "approval_required"]
    assert "support.read_inbox" in Run.objects.get(pk=run["run_id"]).taint_source
    later = post_calls(agent_client, run["run_id"], [call("c3", "orders.echo_write", {"a": 3})]).json()
    assert later["results"][0]["status"] == "approval_required"


def test_result_over_limit_is_cut_with_explicit_note(agent_client, skills):
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "orders.big")]).json()["results"][0]
    assert result["truncated"] is True
    assert len(result["content"]["items"]) < 200
    note = result["truncation"]
    assert note["total_items"] == 200 and note["returned_items"] == len(result["content"]["items"])
    assert 'with "airlock_page" set to the value of "next"' in result["warnings"][-1]  # how to follow the page
    assert result["next"]
    assert ToolCall.objects.get(call_id="c1").truncated


@pytest.mark.parametrize(
    "name,error_class,status",
    [
        ("orders.slow_read", "transient", CallStatus.FAILED),
        ("orders.slow_write", "timeout_unknown", CallStatus.TIMEOUT_UNKNOWN),
    ],
)
def test_timeouts(agent_client, skills, name, error_class, status):
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", name, {"seconds": 1})]).json()["results"][0]
    assert result["error"]["class"] == error_class
    assert ToolCall.objects.get(call_id="c1").status == status


def test_rate_limit_per_agent_returns_retry_after(agent_client, skills, settings):
    settings.AIRLOCK_RATE_LIMIT_AGENT_PER_MINUTE = 2
    run = start_run(agent_client)
    body = post_calls(
        agent_client, run["run_id"], [call(f"c{i}", "orders.echo_write", {"i": i}) for i in range(3)]
    ).json()
    assert [r["status"] for r in body["results"]] == ["ok", "ok", "error"]
    error = body["results"][2]["error"]
    assert error["class"] == "rate_limited" and 1 <= error["retry_after"] <= 60


def test_rate_limit_per_skill(agent_client, skills, settings):
    settings.AIRLOCK_RATE_LIMIT_SKILL_PER_MINUTE = 1
    run = start_run(agent_client)
    body = post_calls(
        agent_client,
        run["run_id"],
        [
            call("c1", "orders.echo_write", {"i": 1}),
            call("c2", "orders.echo_write", {"i": 2}),
            call("c3", "support.read_inbox"),
        ],
    ).json()
    assert [r["status"] for r in body["results"]] == ["ok", "error", "ok"]
    assert body["results"][1]["error"]["code"] == "skill_rate_limited"


def test_a_manifest_can_set_its_own_rate_limit(agent_client, acme):
    from registry.validation import validate_manifest
    from tests.runs.factories import grant, make_skill, manifest

    body = manifest("orders.limited_echo", adapter="python:test.echo")
    body["execution"]["rate_limit_per_minute"] = 1
    assert not [e for e in validate_manifest(body) if "rate_limit_per_minute" in e["path"] + e["message"]]
    body["execution"]["rate_limit_per_minute"] = 0
    assert any("rate_limit_per_minute" in e["path"] + e["message"] for e in validate_manifest(body))
    body["execution"]["rate_limit_per_minute"] = 1
    grant(acme, "orders.*")
    make_skill("orders.limited_echo", adapter="python:test.echo", rate_limit_per_minute=1)
    run = start_run(agent_client)
    results = post_calls(
        agent_client,
        run["run_id"],
        [call("c1", "orders.limited_echo", {"i": 1}), call("c2", "orders.limited_echo", {"i": 2})],
    ).json()["results"]
    assert [r["status"] for r in results] == ["ok", "error"]
    assert results[1]["error"]["code"] == "skill_rate_limited" and "1 calls a minute" in results[1]["error"]["message"]


def test_calls_endpoint_query_count_does_not_grow_per_call(agent_client, skills, django_assert_max_num_queries):
    run = start_run(agent_client)
    url = reverse("runs_api:run_calls", args=[run["run_id"]])
    post_calls(agent_client, run["run_id"], [call("warm", "orders.echo_write", {"a": 0})])
    batch = [call(f"c{i}", "support.read_inbox", {"i": i}) for i in range(10)]
    # Nothing may grow with the batch: the run query, the calls (one INSERT), the run's taint, the spans
    # (one INSERT) and the trace's counters, with their transaction and savepoints.
    with django_assert_max_num_queries(10):
        response = agent_client.post(url, {"calls": batch}, format="json")
    assert response.status_code == 200


def test_execute_approved_call_runs_once_and_records(agent_client, acme):
    from runs.services import execute_approved_call

    make_skill("support.send_email", effect="external", adapter="python:demo.send_email")
    grant(acme, "support.*")
    run = start_run(agent_client)
    arguments = {"to": "ada@example.org", "subject": "Hi", "body_text": "Your refund is on its way."}
    body = post_calls(agent_client, run["run_id"], [call("c1", "support.send_email", arguments)]).json()
    assert body["results"][0]["status"] == "approval_required"
    stored = ToolCall.objects.get(call_id="c1")
    first = execute_approved_call(call=stored, arguments=arguments)
    second = execute_approved_call(call=stored, arguments=arguments)
    assert first == second and first["status"] == "ok" and first["content"]["message_id"] == "msg_0001"
    assert len(demo_tools.outbox()) == 1
    stored.refresh_from_db()
    assert stored.status == CallStatus.SUCCEEDED and stored.sealed_arguments == ""
    replay = post_calls(agent_client, run["run_id"], [call("c1", "support.send_email", arguments)]).json()
    assert replay["results"][0]["content"]["message_id"] == "msg_0001" and len(demo_tools.outbox()) == 1


def test_gate_failure_fails_closed(agent_client, skills):
    """The policy store cannot be read: a published version's rules were corrupted in the database, around
    the service layer that validates them. Every call is refused with the generic internal error, nothing
    about the failure reaches the agent, and nothing is recorded as run or keyed. (Breaking between the
    decision and a write: tests/runs/test_reauthorization.py.)"""
    published_policy([rule("ok", "allow")], name="store")
    PolicyVersion.objects.filter(policy__name="store").update(rules={"not": "a list of rules"})
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "orders.echo_write", {"a": 1})]).json()["results"][0]
    assert result["error"]["class"] == "internal" and "rules" not in str(result) and "TypeError" not in str(result)
    assert not ToolCall.objects.filter(call_id="c1").exclude(status=CallStatus.FAILED).exists()
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_with_one_key_execute_once(agent_client, acme):
    """Two requests racing with the same idempotency key: one executes, the other gets in_progress
    or the recorded outcome; the refund exists once."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    make_skill("billing.create_refund_request", effect="write", adapter="python:demo.create_refund_request")
    grant(acme, "billing.*")
    arguments = {"order_id": "ord_5001", "amount_cents": 100, "currency": "EUR", "reason_code": "late"}
    runs = [start_run(agent_client)["run_id"] for _ in range(4)]

    def propose(run_id):
        try:
            return post_calls(
                agent_client, run_id, [call("c1", "billing.create_refund_request", arguments, idempotency_key="race-1")]
            ).json()["results"][0]
        finally:
            connections.close_all()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(propose, runs))
    assert len(demo_tools.refunds()) == 1
    assert {r["status"] for r in results} <= {"ok", "error"}
    assert all(r["status"] == "ok" or r["error"]["code"] == "in_progress" for r in results)


def test_concurrent_read_timeouts_run_from_each_start_not_in_sequence(agent_client, skills):
    run = start_run(agent_client)
    started = time.monotonic()
    body = post_calls(
        agent_client, run["run_id"], [call(f"c{i}", "orders.slow_read", {"seconds": 2}) for i in range(5)]
    ).json()
    elapsed = time.monotonic() - started
    assert [r["error"]["class"] for r in body["results"]] == ["transient"] * 5
    assert elapsed < 0.9  # five 200 ms timeouts waited one after another would take at least 1 s
