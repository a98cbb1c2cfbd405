"""Three server processes on one PostgreSQL database and Redis are one Airlock.

Three uvicorn processes serve the ASGI app; a round-robin proxy in front hands each new connection to the
next one (every client here opens a connection per request, so consecutive requests land on different
processes). One agent drives a run over REST and waits on the long poll, one approver watches the inbox
socket on one process and decides through another, and the official MCP client drives one session; a
real Celery worker resumes approved calls. Then a process is SIGKILLed in the middle of a write, and the
agent's retry, served by another, is told the reconciliation outcome once the lease has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import httpx2
import pytest
import websockets.sync.client
from django.conf import settings
from django.test import Client as DjangoClient
from django.urls import reverse
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import free_port, uvicorn_command
from console.celery import app as celery_app
from console.services import create_personal_token
from registry.snapshots import publish_snapshot
from reliability.models import ReconciliationItem
from runs.models import CallStatus, Run, ToolCall
from tests.celery_worker import start_worker, stop_worker, wait_for, worker_env
from tests.runs.factories import grant, make_skill

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]
PROCESSES = 3
CEILING_S = 60  # generous: every wait below is on a condition, never a deadline the machine must meet
READ = ("ops.read_profile", {"customer_id": "cus_ada100"})
WRITE = ("ops.update_ticket", {"ticket_id": "tkt_1001", "status": "pending"})
REFUND = ("ops.refund", {"order_id": "ord_5001", "amount_cents": 100, "currency": "EUR", "reason_code": "late"})
HANG = ("ops.hang", {"n": 1})


class RoundRobinProxy:
    """A TCP proxy handing each new connection to the next live backend, and noting which one served it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.served: list[int] = []
        self._next = itertools.cycle(range(len(ports)))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="round-robin-proxy").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _backend(self) -> tuple[socket.socket, int]:
        for _ in self.ports:  # a killed process refuses: the next one takes the connection
            port = self.ports[next(self._next)]
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=5), port
            except OSError:
                continue
        raise OSError("no backend is up")

    def _forward(self, client: socket.socket) -> None:
        try:
            backend, port = self._backend()
        except OSError:
            client.close()
            return
        backend.settimeout(None)
        self.served.append(port)
        threading.Thread(target=_pipe, args=(backend, client), daemon=True).start()
        _pipe(client, backend)

    def close(self) -> None:
        self._listener.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


class HangingDownstream:
    """The downstream of `ops.hang`: it takes the request and answers only when released."""

    def __init__(self) -> None:
        self.arrived, self.release = threading.Event(), threading.Event()
        downstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                downstream.arrived.set()
                downstream.release.wait(CEILING_S)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hang"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hanging_downstream() -> Iterator[HangingDownstream]:
    downstream = HangingDownstream()
    yield downstream
    downstream.stop()


@pytest.fixture
def catalog(acme, hanging_downstream):
    """Skills on the demo tools, which every server process and the worker register themselves."""
    make_skill(READ[0], effect="read", adapter="python:demo.read_profile", publish=False)
    make_skill(WRITE[0], effect="write", adapter="python:demo.update_ticket_status", publish=False)
    make_skill(
        REFUND[0], effect="write", approval="required", adapter="python:demo.create_refund_request", publish=False
    )
    make_skill(HANG[0], effect="write", adapter=hanging_downstream.url, publish=False)
    grant(acme, "ops.*")
    publish_snapshot(reason="three processes")


def _server_env() -> dict[str, str]:
    database = settings.DATABASES["default"]
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/"
        f"{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,  # the approver's session cookie, made here, must hold there
        "AIRLOCK_SIGNING_KEY": str(settings.AIRLOCK_SIGNING_KEY_FILE),
        "AIRLOCK_MCP_APPROVAL_WAIT_SECONDS": "1",
    }


def _serve(port: int, log) -> subprocess.Popen:
    server = subprocess.Popen(
        uvicorn_command(port, "--log-level", "warning"),
        env=_server_env(),
        cwd=settings.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + CEILING_S
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}{reverse('runs_api:run_create')}", timeout=1)  # any answer: up
            return server
        except httpx.HTTPError:
            time.sleep(0.1)
    os.killpg(server.pid, signal.SIGKILL)
    log.flush()
    raise RuntimeError(f"uvicorn did not start:\n{Path(log.name).read_text()[-3000:]}")


@pytest.fixture
def three_processes(tmp_path) -> Iterator[tuple[list[int], list[subprocess.Popen], RoundRobinProxy]]:
    ports = [free_port() for _ in range(PROCESSES)]
    log = (tmp_path / "servers.log").open("w")
    servers = []
    proxy = None
    try:
        servers = [_serve(port, log) for port in ports]
        proxy = RoundRobinProxy(ports)
        yield ports, servers, proxy
    finally:
        if proxy is not None:
            proxy.close()
        for server in servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(10)
        log.close()


@pytest.fixture
def worker(tmp_path) -> Iterator[None]:
    """A real Celery worker: approved calls resume there."""
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    process = start_worker("three", tmp_path / "worker.log", worker_env(), "--pool=solo")
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = True
        stop_worker(process)


def _one_request_per_connection(base_url: str, **headers: str) -> httpx.Client:
    """Keep-alive off: each request opens a connection, so the proxy sends it to the next process."""
    return httpx.Client(
        base_url=base_url, headers=headers, timeout=CEILING_S, limits=httpx.Limits(max_keepalive_connections=0)
    )


def _session_cookie(user) -> str:
    client = DjangoClient()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


class InboxSocket:
    """The approver's inbox websocket, held open on one process, collecting what it is told."""

    def __init__(self, port: int, cookie: str) -> None:
        self.messages: list[dict] = []
        self.socket = websockets.sync.client.connect(
            f"ws://127.0.0.1:{port}/ws/approvals/",
            origin=f"http://127.0.0.1:{port}",
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
            open_timeout=CEILING_S,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for message in self.socket:
                self.messages.append(json.loads(message))
        except websockets.exceptions.ConnectionClosed:
            pass

    def saw(self, approval_id: int, status: str) -> bool:
        return any(m.get("approval_id") == approval_id and m.get("status") == status for m in self.messages)


def _decide(base_url: str, token: str, approval_id: int) -> None:
    with _one_request_per_connection(base_url, Authorization=f"Bearer {token}") as approver:
        decided = approver.post(
            reverse("approvals_api:approval_decision", args=[approval_id]), json={"decision": "approve"}
        )
    assert decided.status_code == 200, decided.text


async def _mcp_session(url: str, key: str, decide) -> list:
    """The official client, one session, each request on a new connection (so on the next process)."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=CEILING_S,
        limits=httpx2.Limits(max_keepalive_connections=0),
    )
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        read = await client.call_tool(*READ)
        write = await client.call_tool(*WRITE)
        pending = await client.call_tool(*REFUND)
        await asyncio.to_thread(decide, pending.structured_content["approval_id"])
        while True:  # check_approval waits up to a second, then says pending; ask again until it is recorded
            checked = await client.call_tool(
                "check_approval", {"approval_id": pending.structured_content["approval_id"]}
            )
            if checked.structured_content["status"] != "approval_pending":
                break
        return [listed, read, write, pending, checked]


def test_three_processes_serve_one_agent_one_approver_and_one_mcp_client_round_robin(
    catalog, agent_and_key, approver, three_processes, worker
):
    ports, servers, proxy = three_processes
    base_url = f"http://127.0.0.1:{proxy.port}"
    key = agent_and_key[1]
    token = create_personal_token(user=approver, name="three processes")[1]
    inbox = InboxSocket(ports[0], _session_cookie(approver))  # the approver watches process 0

    # The agent over REST: each request to the next process.
    with _one_request_per_connection(base_url, Authorization=f"Bearer {key}") as agent:
        started = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-1", "task": "three processes"})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        calls_url = reverse("runs_api:run_calls", args=[run_id])
        batch = [
            {"call_id": "read", "name": READ[0], "arguments": READ[1]},
            {"call_id": "write", "name": WRITE[0], "arguments": WRITE[1]},
        ]
        answered = agent.post(calls_url, json={"calls": batch}).json()["results"]
        assert [r["status"] for r in answered] == ["ok", "ok"], answered
        refund = agent.post(
            calls_url, json={"calls": [{"call_id": "refund", "name": REFUND[0], "arguments": REFUND[1]}]}
        )
        [asked] = refund.json()["results"]
        assert asked["status"] == "approval_required", asked
        wait_for(lambda: inbox.saw(asked["approval_id"], "pending"), CEILING_S, "the socket to hear of the request")

        polled: dict = {}
        events_url = reverse("runs_api:run_events", args=[run_id])

        def long_poll() -> None:
            cursor = 0
            deadline = time.monotonic() + CEILING_S
            while time.monotonic() < deadline:
                feed = agent.get(events_url, params={"after": cursor, "wait": 10}).json()
                cursor = feed["next_cursor"]
                for event in feed["events"]:
                    if event["kind"] == "call.completed" and event["payload"]["call_id"] == "refund":
                        polled["result"] = event["payload"]["result"]
                        return

        waiter = threading.Thread(target=long_poll)
        waiter.start()
        _decide(base_url, token, asked["approval_id"])  # on whichever process the proxy picks next
        waiter.join(CEILING_S + 15)
        assert polled["result"]["status"] == "ok", polled
        wait_for(lambda: inbox.saw(asked["approval_id"], "approved"), CEILING_S, "the socket to hear of the decision")
        assert ToolCall.objects.get(run_id=run_id, call_id="refund").status == CallStatus.SUCCEEDED

    # The MCP client: one session, each request on the next process.
    listed, read, write, pending, checked = asyncio.run(
        _mcp_session(f"{base_url}/mcp", key, lambda approval_id: _decide(base_url, token, approval_id))
    )
    assert {READ[0], WRITE[0], REFUND[0], HANG[0], "check_approval"} <= set(listed)
    assert not read.is_error and not write.is_error, (read, write)
    assert pending.structured_content["status"] == "approval_pending"
    assert checked.structured_content["status"] == "ok", checked.structured_content
    session_run = Run.objects.exclude(pk=run_id).get()  # one run for the whole session, on every process
    calls = ToolCall.objects.filter(run=session_run).order_by("created_at")
    assert [(c.call_id, c.name) for c in calls] == [("mcp-1", READ[0]), ("mcp-2", WRITE[0]), ("mcp-3", REFUND[0])]
    assert calls.get(call_id="mcp-2").decision["exposed_tools"]["names"] == listed  # listed on another process
    assert set(proxy.served) == set(ports)  # every process served part of it
    inbox.socket.close()


def test_a_retry_after_a_process_died_mid_write_is_told_the_reconciliation_outcome(
    catalog, agent_and_key, hanging_downstream, three_processes
):
    ports, servers, proxy = three_processes
    key = agent_and_key[1]
    with _one_request_per_connection(f"http://127.0.0.1:{proxy.port}", Authorization=f"Bearer {key}") as agent:
        run_id = agent.post(reverse("runs_api:run_create"), json={"end_user": "u-1", "task": "kill"}).json()["run_id"]
        calls_url = reverse("runs_api:run_calls", args=[run_id])
        batch = {"calls": [{"call_id": "hang", "name": HANG[0], "arguments": HANG[1], "idempotency_key": "hang-1"}]}

        # The write goes to process 1 directly; it dies while the downstream holds the call.
        doomed = threading.Thread(
            target=lambda: _swallow(
                lambda: httpx.post(
                    f"http://127.0.0.1:{ports[1]}{calls_url}",
                    json=batch,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=CEILING_S,
                )
            )
        )
        doomed.start()
        assert hanging_downstream.arrived.wait(CEILING_S)
        os.killpg(servers[1].pid, signal.SIGKILL)
        servers[1].wait(10)
        doomed.join(CEILING_S)

        left = ToolCall.objects.get(run_id=run_id, call_id="hang")
        assert left.status == CallStatus.EXECUTING and left.result is None
        within = agent.post(calls_url, json=batch).json()["results"][0]  # served by a live process
        assert within["error"]["code"] == "in_progress"

        # The lease runs out (the servers' clocks are real: the row's lease is moved instead of waiting it).
        ToolCall.objects.filter(pk=left.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        for _ in range(PROCESSES):  # both live processes answer alike
            retried = agent.post(calls_url, json=batch).json()["results"][0]
            assert (retried["error"]["class"], retried["error"]["code"]) == ("timeout_unknown", "lease_expired")
    left.refresh_from_db()
    assert left.status == CallStatus.TIMEOUT_UNKNOWN
    assert ReconciliationItem.objects.filter(call=left).count() == 1


def _swallow(request) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the process was killed under it
        request()
