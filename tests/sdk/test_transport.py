"""Retries only where repeating is safe; clear exceptions otherwise (no server: a scripted transport)."""

import httpx
import pytest
from airlock_sdk import ControlPlaneUnavailable, OutcomeUnknown, RateLimited
from airlock_sdk.transport import Transport

from tests.sdk.fakes import FakeAirlock

RUN = {"run_id": "r-1", "status": "running", "snapshot": 3, "trace_id": "ab" * 16}
OK = {"call_id": "c1", "status": "ok", "is_error": False, "content": {"x": 1}, "skill": {"name": "a.b"}}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)


def test_a_get_is_retried_after_a_read_timeout_and_a_503(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/runs/r-1", httpx.ReadTimeout("slow"), httpx.Response(503), httpx.Response(200, json=RUN))
    run = fake.client(tmp_path, use_cache=False).get_run("r-1")
    assert run.run_id == "r-1"
    assert len(fake.sent("GET", "/api/v1/runs/r-1")) == 3


def test_a_batch_that_got_no_answer_is_resent_once_with_the_same_call_ids(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/runs/r-1", httpx.Response(200, json=RUN))
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.ReadTimeout("gone"),
        httpx.Response(200, json={"run_id": "r-1", "run_status": "running", "results": [OK]}),
    )
    run = fake.client(tmp_path, use_cache=False).get_run("r-1")
    [result] = run.call([{"call_id": "c1", "name": "a.b", "arguments": {}}])
    assert result.ok
    sent = fake.sent("POST", "/api/v1/runs/r-1/calls")
    assert len(sent) == 2 and sent[0].content == sent[1].content


def test_a_batch_that_gets_no_answer_twice_is_an_unknown_outcome(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/runs/r-1", httpx.Response(200, json=RUN))
    fake.on("POST", "/api/v1/runs/r-1/calls", httpx.ReadTimeout("gone"))
    run = fake.client(tmp_path, use_cache=False).get_run("r-1")
    with pytest.raises(OutcomeUnknown) as caught:
        run.call([{"call_id": "c1", "name": "billing.create_refund_request", "arguments": {"order_id": "o-1"}}])
    assert caught.value.call_ids == ["c1"] and caught.value.sent
    assert len(fake.sent("POST", "/api/v1/runs/r-1/calls")) == 2


def test_a_batch_whose_connection_was_refused_is_retried_then_reported_unavailable(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/runs/r-1", httpx.Response(200, json=RUN))
    fake.on(
        "POST",
        "/api/v1/runs/r-1/calls",
        httpx.ConnectError("refused"),
        httpx.ConnectError("refused"),
        httpx.Response(200, json={"run_id": "r-1", "run_status": "running", "tainted": False, "results": [OK]}),
    )
    run = fake.client(tmp_path, use_cache=False).get_run("r-1")
    [result] = run.call([{"call_id": "c1", "name": "a.b", "arguments": {}}])
    assert result.ok and result.content == {"x": 1}
    assert len(fake.sent("POST", "/api/v1/runs/r-1/calls")) == 3  # never reached the server twice

    fake.routes[("POST", "/api/v1/runs/r-1/calls")] = [httpx.ConnectError("refused")]
    with pytest.raises(ControlPlaneUnavailable) as caught:
        run.call([{"call_id": "c2", "name": "a.b", "arguments": {}}])
    assert caught.value.sent is False


def test_starting_a_run_is_not_retried_once_sent(tmp_path):
    fake = FakeAirlock()
    fake.on("POST", "/api/v1/runs", httpx.Response(503), httpx.Response(201, json=RUN))
    with pytest.raises(ControlPlaneUnavailable):
        fake.client(tmp_path, use_cache=False).start_run(end_user="u-1", task="t")
    assert len(fake.sent("POST", "/api/v1/runs")) == 1


def test_a_rate_limited_get_waits_and_retries_but_a_post_surfaces_retry_after(tmp_path):
    fake = FakeAirlock()
    limited = httpx.Response(
        429,
        headers={"Retry-After": "2"},
        json={"error": {"class": "rate_limited", "code": "agent_rate_limited", "message": "slow", "retry_after": 2}},
    )
    fake.on("GET", "/api/v1/runs/r-1", limited, httpx.Response(200, json=RUN))
    fake.on("POST", "/api/v1/runs/r-1/calls", limited)
    run = fake.client(tmp_path, use_cache=False).get_run("r-1")
    with pytest.raises(RateLimited) as caught:
        run.call([{"call_id": "c1", "name": "a.b", "arguments": {}}])
    assert caught.value.retry_after == 2


def test_the_api_key_is_sent_as_a_bearer_token():
    fake = FakeAirlock()
    fake.on("GET", "/x", httpx.Response(200, json={}))
    transport = Transport("http://airlock.test/", "ak_abc", client=httpx.Client(transport=httpx.MockTransport(fake)))
    transport.json("GET", "/x", safe=True)
    assert fake.requests[0].headers["Authorization"] == "Bearer ak_abc"
