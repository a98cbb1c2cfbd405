"""A web worker SIGKILLed the moment it answered a batch loses nothing of that answer.

Airlock serves on PostgreSQL with the default connection pool, in one uvicorn process. The agent
posts an allowed read, an allowed write, a call a policy denies and one that needs approval; as soon
as the answer arrives the process is killed (no shutdown, no on_commit, no thread gets to finish).
The database must then hold, for every call of the answer, its final status and the result the
agent was told, the write's idempotency outcome, the approval request and the spans the timeline
shows; and the restarted server must answer the same batch with the same outcomes, running nothing
again. Five kills in a row, so that a write racing the answer would show.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import pytest
from django.conf import settings
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from bench.common import free_port, uvicorn_command
from registry.snapshots import publish_snapshot
from runs.models import CallStatus, IdempotencyRecord, Run, RunEvent, ToolCall
from tests.runs.factories import grant, make_skill, published_policy, rule
from traces.models import Span, Trace
from traces.timeline import build_timeline

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
KILLS = 5


@pytest.fixture
def catalog(acme):
    """Skills on the demo tools, which the server process registers itself (runs/demo_tools.py)."""
    make_skill("durable.read_profile", effect="read", adapter="python:demo.read_profile", publish=False)
    make_skill("durable.update_ticket", effect="write", adapter="python:demo.update_ticket_status", publish=False)
    make_skill("durable.delete_user", effect="write", adapter="python:demo.delete_user_permanently", publish=False)
    make_skill(
        "durable.refund",
        effect="write",
        approval="required",
        adapter="python:demo.create_refund_request",
        publish=False,
    )
    grant(acme, "durable.*")
    published_policy([rule("no-deletes", "deny", "skill.name == 'durable.delete_user'")], scope="tenant", tenant=acme)
    publish_snapshot(reason="sigkill after answer")


def _server_env() -> dict[str, str]:
    database = settings.DATABASES["default"]
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "REDIS_URL": settings.REDIS_URL or "",
        # No query: the deployment's default, a psycopg pool per process (console/env.py).
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/"
        f"{database['NAME']}",
        "AIRLOCK_SIGNING_KEY": str(settings.AIRLOCK_SIGNING_KEY_FILE),
    }


def _serve(port: int, log) -> subprocess.Popen:
    server = subprocess.Popen(
        uvicorn_command(port, "--log-level", "warning", "--lifespan", "off"),
        env=_server_env(),
        cwd=settings.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}{reverse('runs_api:run_create')}", timeout=1)  # any answer: up
            return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("uvicorn did not start")


def _kill(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGKILL)
    server.wait(10)


def _batch(round_number: int) -> list[dict]:
    return [
        {"call_id": f"read-{round_number}", "name": "durable.read_profile", "arguments": {"customer_id": "cus_ada100"}},
        {
            "call_id": f"write-{round_number}",
            "name": "durable.update_ticket",
            "arguments": {"ticket_id": "tkt_1001", "status": "pending"},
        },
        {"call_id": f"deny-{round_number}", "name": "durable.delete_user", "arguments": {"user_id": "usr_alan102"}},
        {
            "call_id": f"confirm-{round_number}",
            "name": "durable.refund",
            "arguments": {"order_id": "ord_5001", "amount_cents": 100 + round_number, "currency": "USD"},
        },
    ]


EXPECTED_STATUS = {
    "read": CallStatus.SUCCEEDED,
    "write": CallStatus.SUCCEEDED,
    "deny": CallStatus.DENIED,
    "confirm": CallStatus.AWAITING_APPROVAL,
}
# What the run's timeline must show for each call: (kind, verdict, outcome) rows.
EXPECTED_ROWS = {
    "read": {("tool_call", "allow", CallStatus.SUCCEEDED)},
    "write": {("tool_call", "allow", CallStatus.SUCCEEDED)},
    "deny": {("tool_call", "deny", CallStatus.DENIED)},
    "confirm": {("tool_call", "confirm", CallStatus.AWAITING_APPROVAL), ("approval_request", "confirm", "")},
}


def _assert_all_recorded(answer: dict) -> None:
    """Everything the answer reports, read back from the database after the kill."""
    run = Run.objects.get(pk=answer["run_id"])
    assert (run.status, run.tainted) == (answer["run_status"], answer["tainted"])
    calls = {call.call_id: call for call in ToolCall.objects.filter(run=run)}
    assert set(calls) == {result["call_id"] for result in answer["results"]}
    trace = Trace.objects.get(run_id=run.pk)
    rows = build_timeline(Span.objects.filter(trace=trace)).rows
    for result in answer["results"]:
        kind = result["call_id"].split("-")[0]
        call = calls[result["call_id"]]
        assert call.status == EXPECTED_STATUS[kind], (kind, call.status, result)
        assert call.result == result, kind  # the stored outcome is what the agent was told
        shown = {(row.kind, row.verdict, row.outcome) for row in rows if row.call_id == call.pk}
        assert EXPECTED_ROWS[kind] <= shown, (kind, shown)
    write = calls[answer["results"][1]["call_id"]]
    assert IdempotencyRecord.objects.get(call=write).outcome == write.result  # a retry replays it
    confirm = answer["results"][3]
    approval = ApprovalRequest.objects.get(pk=confirm["approval_id"])
    assert approval.status == ApprovalStatus.PENDING and approval.call_id == calls[confirm["call_id"]].pk
    assert RunEvent.objects.filter(run=run, kind="approval.requested").count() == 1
    assert Trace.objects.get(pk=trace.pk).span_count == Span.objects.filter(trace=trace).count()


def _outcome(result: dict) -> tuple:
    return result["status"], result.get("content"), result.get("error"), result.get("approval_id")


def test_nothing_the_answer_reports_is_lost_when_the_worker_is_killed_right_after(catalog, agent_and_key, tmp_path):
    port = free_port()
    headers = {"Authorization": f"Bearer {agent_and_key[1]}"}
    log = (tmp_path / "server.log").open("w")
    answers: list[tuple[str, list[dict], dict]] = []
    server = None
    try:
        for round_number in range(KILLS):
            server = _serve(port, log)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as agent:
                if answers:  # the restarted server has the last answer: the same batch replays it, runs nothing
                    run_id, batch, answer = answers[-1]
                    replayed = agent.post(reverse("runs_api:run_calls", args=[run_id]), json={"calls": batch})
                    assert replayed.status_code == 200, replayed.text
                    assert [_outcome(r) for r in replayed.json()["results"]] == [_outcome(r) for r in answer["results"]]
                    _assert_all_recorded(answer)  # and the replay changed none of it
                started = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-1", "task": "durability"})
                assert started.status_code == 201, started.text
                run_id, batch = started.json()["run_id"], _batch(round_number)
                response = agent.post(reverse("runs_api:run_calls", args=[run_id]), json={"calls": batch})
                _kill(server)  # the moment the answer is in
            assert response.status_code == 200, response.text
            answer = response.json()
            assert [r["status"] for r in answer["results"]] == ["ok", "ok", "error", "approval_required"], answer
            _assert_all_recorded(answer)
            answers.append((run_id, batch, answer))
    finally:
        if server is not None and server.poll() is None:
            _kill(server)
        log.close()
