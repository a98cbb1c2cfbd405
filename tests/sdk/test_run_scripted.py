"""Run.call / Run.wait / tools against a scripted control plane (the live-server versions are in test_live.py)."""

import hashlib
from pathlib import Path

import httpx
import pytest
from airlock_sdk import ApprovalRequired, ApprovalTimeout, Error, Ok
from airlock_sdk.canonical import canonical_json

from tests.sdk.fakes import FakeAirlock, body

RUN = {"run_id": "r-1", "status": "running", "snapshot": 3}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)


def started(fake: FakeAirlock, tmp_path, **kwargs):
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json=RUN))
    airlock = fake.client(tmp_path, use_cache=False, **kwargs)
    return airlock, airlock.start_run(end_user="u-1", task="t")


def test_results_are_typed_and_in_call_order(tmp_path):
    fake = FakeAirlock()
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.Response(
            200,
            json={
                "run_id": "r-1",
                "run_status": "paused",
                "tainted": True,
                "results": [
                    {"call_id": "a", "status": "ok", "is_error": False, "content": [1], "skill": {"name": "x.read"}},
                    {
                        "call_id": "b",
                        "status": "error",
                        "is_error": True,
                        "error": {
                            "class": "rate_limited",
                            "code": "skill_rate_limited",
                            "message": "m",
                            "retry_after": 3,
                        },
                    },
                    {
                        "call_id": "c",
                        "status": "approval_required",
                        "is_error": False,
                        "approval_id": 9,
                        "proposed_action": {"skill": "x.write"},
                        "reason": "external",
                        "expires_at": "2026-01-01T00:00:00Z",
                    },
                ],
            },
        ),
    )
    _, run = started(fake, tmp_path)
    ok, error, approval = run.call([{"call_id": c, "name": "x", "arguments": {}} for c in "abc"])
    assert isinstance(ok, Ok) and ok.content == [1]
    assert isinstance(error, Error) and error.error_class == "rate_limited" and error.retry_after == 3
    assert error.retryable
    assert isinstance(approval, ApprovalRequired) and approval.approval_id == 9
    assert run.tainted and run.run_status == "paused"


def test_call_ids_are_generated_unique_within_the_run(tmp_path):
    fake = FakeAirlock()
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        lambda request: httpx.Response(
            200,
            json={
                "results": [
                    {"call_id": c["call_id"], "status": "ok", "is_error": False, "content": None}
                    for c in body(request)["calls"]
                ]
            },
        ),
    )
    _, run = started(fake, tmp_path)
    first = run.call([{"name": "x", "arguments": {}}, {"name": "x", "arguments": {}}])
    second = run.call([{"name": "x", "arguments": {}}])
    assert len({r.call_id for r in first + second}) == 3


def test_a_client_skill_runs_locally_and_its_result_is_reported_with_the_token(tmp_path):
    fake = FakeAirlock()
    arguments = {"path": "notes.txt"}
    digest = hashlib.sha256(canonical_json(arguments)).hexdigest()
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.Response(
            200,
            json={
                "results": [
                    {
                        "call_id": "c1",
                        "status": "execute_locally",
                        "is_error": False,
                        "token": "tok",
                        "arguments_sha256": digest,
                        "skill": {"name": "files.read_local", "version": "1.0.0"},
                    }
                ]
            },
        ),
    )
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls/c1/result",
        lambda request: httpx.Response(
            200, json={"call_id": "c1", "status": "ok", "is_error": False, "content": body(request)["content"]}
        ),
    )
    airlock, run = started(fake, tmp_path)

    @airlock.client_skill("files.read_local")
    def read_local(path: str) -> dict:
        return {"path": path, "text": "hello"}

    [result] = run.call([{"call_id": "c1", "name": "files.read_local", "arguments": arguments}])
    assert result.ok and result.executed_locally and result.content == {"path": "notes.txt", "text": "hello"}
    assert body(fake.sent("POST", "/api/v1/runs/r-1/calls/c1/result")[0])["token"] == "tok"


def test_a_failing_client_skill_reports_its_error_and_nothing_else(tmp_path):
    fake = FakeAirlock()
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.Response(
            200,
            json={
                "results": [
                    {
                        "call_id": "c1",
                        "status": "execute_locally",
                        "is_error": False,
                        "token": "tok",
                        "skill": {"name": "files.read_local"},
                    }
                ]
            },
        ),
    )
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls/c1/result",
        lambda request: httpx.Response(
            200,
            json={
                "call_id": "c1",
                "status": "error",
                "is_error": True,
                "error": {
                    "class": "unavailable",
                    "code": "client_skill_failed",
                    "message": body(request)["error"]["message"],
                },
            },
        ),
    )
    airlock, run = started(fake, tmp_path)
    airlock.client_skills.register("files.read_local", lambda path: Path(path).read_text())
    [result] = run.call([{"call_id": "c1", "name": "files.read_local", "arguments": {"path": "/nonexistent/x"}}])
    assert result.error_class == "unavailable" and "FileNotFoundError" in result.message


def test_wait_follows_the_long_poll_until_the_outcome(tmp_path):
    fake = FakeAirlock()
    outcome = {"call_id": "c", "status": "ok", "is_error": False, "content": {"sent": True}}
    fake.on(
        "GET",
        "/api/v1/runs/r-1/events",
        httpx.Response(200, json={"events": [], "next_cursor": None, "run_status": "paused"}),
        httpx.Response(
            200,
            json={
                "events": [
                    {
                        "id": 4,
                        "kind": "approval.decided",
                        "payload": {"approval_id": 9, "call_id": "c", "decision": "approved", "decided_by": "alice"},
                    }
                ],
                "next_cursor": 4,
                "run_status": "paused",
            },
        ),
        httpx.Response(
            200,
            json={
                "events": [
                    {
                        "id": 5,
                        "kind": "call.completed",
                        "payload": {"call_id": "c", "approval_id": 9, "result": outcome},
                    }
                ],
                "next_cursor": 5,
                "run_status": "running",
            },
        ),
    )
    _, run = started(fake, tmp_path)
    result = run.wait(9, timeout=5)
    assert isinstance(result, Ok) and result.content == {"sent": True}
    polls = fake.sent("GET", "/api/v1/runs/r-1/events")
    assert polls[-1].url.params["after"] == "4" and int(polls[0].url.params["wait"]) > 0


def test_wait_returns_a_declined_error(tmp_path):
    fake = FakeAirlock()
    fake.on(
        "GET",
        "/api/v1/runs/r-1/events",
        httpx.Response(
            200,
            json={
                "events": [
                    {
                        "id": 1,
                        "kind": "approval.decided",
                        "payload": {"approval_id": 9, "call_id": "c", "decision": "declined", "decided_by": "bob"},
                    },
                    {
                        "id": 2,
                        "kind": "call.completed",
                        "payload": {
                            "call_id": "c",
                            "approval_id": 9,
                            "result": {
                                "call_id": "c",
                                "status": "error",
                                "is_error": True,
                                "error": {
                                    "class": "declined",
                                    "code": "declined",
                                    "message": "declined by bob: wrong customer",
                                },
                            },
                        },
                    },
                ],
                "next_cursor": 2,
            },
        ),
    )
    _, run = started(fake, tmp_path)
    result = run.wait(9, timeout=5)
    assert isinstance(result, Error) and result.error_class == "declined" and "bob" in result.message


def test_wait_gives_up_at_its_timeout(tmp_path, monkeypatch):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/runs/r-1/events", httpx.Response(200, json={"events": [], "next_cursor": None}))
    _, run = started(fake, tmp_path)
    with pytest.raises(ApprovalTimeout):
        run.wait(9, timeout=0.2)


def test_tools_are_served_from_the_cache_while_the_control_plane_is_down(tmp_path):
    tools = [
        {
            "type": "function",
            "function": {"name": "billing_create_refund_request", "description": "Refund"},
            "x-airlock-skill": "billing.create_refund_request",
        },
        {"type": "function", "function": {"name": "docs_search", "description": "Search the docs"}},
    ]
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/tools", httpx.Response(200, json={"tools": tools}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(503))
    live = fake.client(tmp_path).tools(format="openai")
    assert not live.stale and len(live) == 2
    down = FakeAirlock()
    down.on("GET", "/api/v1/tools", httpx.ConnectError("refused"))
    cached = down.client(tmp_path).tools(format="openai", query="refund")
    assert cached.stale and "unreachable" in cached.notice
    assert [t["function"]["name"] for t in cached] == ["billing_create_refund_request"]


def test_finish_reports_the_end_of_the_run_or_says_the_server_lacks_it(tmp_path):
    from airlock_sdk import NotFound

    fake = FakeAirlock()
    fake.on(
        "POST",
        "/api/v1/runs/r-1/finish",
        lambda request: httpx.Response(200, json={"run_id": "r-1", "status": body(request)["status"]}),
    )
    _, run = started(fake, tmp_path)
    run.finish("completed", "done")
    assert run.run_status == "completed"
    assert body(fake.sent("POST", "/api/v1/runs/r-1/finish")[0]) == {"status": "completed", "reason": "done"}
    bare = FakeAirlock()
    _, other = started(bare, tmp_path)
    with pytest.raises(NotFound):
        other.finish()
