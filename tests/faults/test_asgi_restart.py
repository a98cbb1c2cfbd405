"""An ASGI worker restart while an agent long-polls: the SDK's wait survives the dropped connection,
resumes from its cursor against the restarted server and gets the outcome, executed once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import httpx
import pytest
from airlock_sdk import Airlock, ApprovalRequired, Ok
from django.conf import settings

from approvals.models import ApprovalRequest
from approvals.services import decide_approval
from bench.common import free_port, uvicorn_command
from tests.approvals import worker_tools
from tests.approvals.gate_world import build_refund_world

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _serve(port: int, env: dict, log) -> subprocess.Popen:
    server = subprocess.Popen(
        uvicorn_command(port, "--log-level", "warning"),
        env=env,
        cwd=settings.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code < 500:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("uvicorn did not start")


def test_the_sdk_wait_survives_a_server_restart(acme, agent_and_key, approver, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    build_refund_world(acme)
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "REDIS_URL": "",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/"
        f"{database['NAME']}",
        "AIRLOCK_SIGNING_KEY": str(settings.AIRLOCK_SIGNING_KEY_FILE),
    }
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    server = _serve(port, env, log)
    try:
        client = Airlock(f"http://127.0.0.1:{port}", agent_and_key[1], retries=3)
        run = client.start_run(end_user="customer-9", task="refund")
        [pending] = run.call(
            [{"name": "billing.create_refund", "arguments": {"customer_id": "c-9", "amount_cents": 321}}]
        )
        assert isinstance(pending, ApprovalRequired)
        outcome: dict = {}
        waiter = threading.Thread(target=lambda: outcome.setdefault("result", run.wait(pending, timeout=60)))
        waiter.start()
        time.sleep(0.2)  # the agent is inside a long poll now (it waits up to 60 s)

        os.killpg(server.pid, signal.SIGKILL)  # the worker dies mid-poll
        server.wait(10)
        # The SDK meets refused connections and keeps retrying while uvicorn starts again (over a second).
        server = _serve(port, env, log)

        decide_approval(
            approval=ApprovalRequest.objects.get(pk=pending.approval_id), user=approver, decision="approve"
        )  # eager: executed and recorded while the agent polls the new server
        waiter.join(30)
        assert not waiter.is_alive(), "the SDK's wait never returned"
        result = outcome["result"]
        assert isinstance(result, Ok) and result.content["amount_cents"] == 321
        assert len(worker_tools.executions()) == 1
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(10)
        log.close()
