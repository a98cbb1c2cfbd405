"""The production process model through its one origin (airlock/serving.py): the nginx front door before
Granian's WSGI workers and the uvicorn stream process, started with the commands `manage.py serve` uses.

A page, an agent's API call, the approvals websocket, a run's events long poll and /mcp all answer at the
front door's address. Then the stream process is stopped: the page and the API still answer (they never
went through it) while the long poll, /mcp and the websocket fail at the front door, so each really took
the route the template gives it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from django.urls import reverse
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from airlock.serving import free_port, front_door_binary, front_door_command, stream_command, web_command
from console.demo import DEMO_PASSWORD
from tests.envscan import ROOT, clean_environ

pytestmark = pytest.mark.skipif(front_door_binary() is None, reason="needs nginx (apt-get install nginx-light)")
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


@dataclass
class Deployment:
    url: str
    agent_key: str
    stream: subprocess.Popen


def _wait_until_up(urls: list[str], processes: list[subprocess.Popen], log) -> None:
    """Until every one of `urls` answers: the front door (and through it the web workers) and the stream
    process on its own port, which the front door reaches only for what streams."""
    deadline = time.monotonic() + 120
    while True:
        try:
            if all(httpx.get(f"{url}/healthz", timeout=5).status_code < 500 for url in urls):
                return
        except httpx.HTTPError:
            pass
        assert all(p.poll() is None for p in processes) and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Iterator[Deployment]:
    workdir = tmp_path_factory.mktemp("process-model")
    port, web, stream = free_port(), free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_environ(
        os.environ,
        DJANGO_SETTINGS_MODULE="console.settings",
        DEBUG="1",  # embedded settings (SQLite, no Redis): the routing is what is under test
        ALLOWED_HOSTS="127.0.0.1",
        AIRLOCK_PUBLIC_URL=url,
        DATABASE_URL=f"sqlite:///{workdir / 'airlock.sqlite3'}",
        AIRLOCK_VAR_DIR=str(workdir),
        AIRLOCK_DEMO="1",  # the demo's tools and data, as `make run` has them
        LOG_LEVEL="WARNING",
    )
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    seeded = subprocess.run([*manage, "seed_demo"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    agent_key = next(word for word in seeded.stdout.decode().split() if word.startswith("ak_"))
    door = front_door_command(
        workdir / "front-door", listen=f"127.0.0.1:{port}", web=f"127.0.0.1:{web}", stream=f"127.0.0.1:{stream}"
    )
    log_path = workdir / "servers.log"
    with log_path.open("w") as log:
        processes = [
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            for command in (web_command("127.0.0.1", web), stream_command("127.0.0.1", stream), door)
        ]
        try:
            _wait_until_up([url, f"http://127.0.0.1:{stream}"], processes, log_path)
            yield Deployment(url=url, agent_key=agent_key, stream=processes[1])
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
            for process in processes:
                process.wait(timeout=30)


def _session_cookie(deployment: Deployment) -> str:
    with httpx.Client(base_url=deployment.url, timeout=30) as client:
        client.get(reverse("console:login"))
        response = client.post(
            reverse("console:login"),
            data={"username": "alice", "password": DEMO_PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
        )
        assert response.status_code == 302, response.text[:500]
        return f"sessionid={client.cookies['sessionid']}"


def _agent(deployment: Deployment) -> httpx.Client:
    headers = {"Authorization": f"Bearer {deployment.agent_key}"}
    return httpx.Client(base_url=deployment.url, headers=headers, timeout=30)


def _mcp_initialize(agent: httpx.Client) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return agent.post("/mcp", content=json.dumps(MCP_INITIALIZE), headers=headers)


def _websocket(deployment: Deployment, cookie: str) -> str:
    """The inbox socket's first message, or raises if the handshake fails."""
    ws_url = deployment.url.replace("http://", "ws://") + "/ws/approvals/"
    with connect(ws_url, origin=deployment.url, additional_headers={"Cookie": cookie}, open_timeout=30) as socket:
        socket.ping().wait(30)
        return "open"


def test_every_kind_of_request_answers_at_the_one_origin_and_takes_its_route(deployment):
    cookie = _session_cookie(deployment)  # the login page and form: web
    with _agent(deployment) as agent:
        started = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-1", "task": "process model"})
        assert started.status_code == 201, started.text
        events_url = reverse("runs_api:run_events", args=[started.json()["run_id"]])
        events = agent.get(events_url, params={"wait": "1"})
        assert events.status_code == 200 and events.json()["run_status"]
        mcp = _mcp_initialize(agent)
        assert mcp.status_code == 200, mcp.text[:500]
        assert _websocket(deployment, cookie) == "open"

        deployment.stream.terminate()  # what streams has nowhere to go now; the rest is unaffected
        deployment.stream.wait(timeout=30)
        assert agent.get(reverse("agent-whoami")).status_code == 200
        assert agent.post(reverse("runs_api:run_create"), json={"end_user": "u-2", "task": "t"}).status_code == 201
        assert httpx.get(deployment.url + reverse("console:login")).status_code == 200
        assert agent.get(events_url, params={"wait": "0"}).status_code == 502
        assert _mcp_initialize(agent).status_code == 502
        with pytest.raises(InvalidStatus):
            _websocket(deployment, cookie)


def _otlp_json(size: int) -> bytes:
    """An OTLP/JSON export of about `size` bytes: spans of one trace, each with a 30 KB attribute."""
    value = "x" * 30_000
    spans = [
        {
            "traceId": "ab" * 16,
            "spanId": f"{index + 1:016x}",
            "name": f"step {index}",
            "kind": 1,
            "startTimeUnixNano": "1777636800000000000",
            "endTimeUnixNano": "1777636800010000000",
            "attributes": [{"key": "note", "value": {"stringValue": value}}],
        }
        for index in range(size // 30_200)
    ]
    export = {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]
    }
    return json.dumps(export).encode()


def test_bodies_nginx_keeps_in_temp_files_reach_the_application(deployment, settings):
    """nginx writes a body over its 16 KB buffer to client_body_temp_path: as root, its worker (nobody) must
    be able to, or every such request is a 500 at the front door (issue 44)."""
    with _agent(deployment) as agent:
        started = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-3", "task": "big bodies"})
        calls = [
            {
                "call_id": f"c{i}",
                "name": "customer.read_profile",
                "arguments": {"customer_id": f"cus_{i:06d}"},
                "idempotency_key": f"big-body-profile-read-{i:04d}",
            }
            for i in range(50)
        ]
        batch = json.dumps({"calls": calls, "exposed_tools": ["customer.read_profile"] * 200}).encode()
        assert 11_000 < len(batch) < 14_000  # over nginx's in-memory body buffer (8 KB)
        answer = agent.post(
            reverse("runs_api:run_calls", args=[started.json()["run_id"]]),
            content=batch,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 200, answer.text[:500]
        assert len(answer.json()["results"]) == 50
        limit = settings.TRACES_INGEST_MAX_BODY_BYTES
        for size in (1024 * 1024, limit - 64 * 1024):
            body = _otlp_json(size)
            assert size - 64 * 1024 < len(body) <= limit
            ingested = agent.post(reverse("otlp:traces"), content=body, headers={"Content-Type": "application/json"})
            assert 200 <= ingested.status_code < 300, (len(body), ingested.status_code, ingested.text[:500])
