"""Live fixtures for the MCP gateway: uvicorn serving the real ASGI app with `/mcp`, a local downstream
that records when each call reached it, a small catalog, and the official MCP client."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import pytest
import uvicorn
from django.core.handlers.asgi import ASGIHandler
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from console.celery import app as celery_app
from console.services import create_agent, create_personal_token
from mcp_gateway.asgi import with_mcp
from registry.snapshots import publish_snapshot
from tests.approvals.gate_world import build_refund_world
from tests.celery_worker import start_worker, stop_worker, worker_env
from tests.runs.factories import grant, make_skill, published_policy, rule

DOWNSTREAM_SECONDS = 0.3  # long enough that two overlapping calls could not be missed


@dataclass
class Arrival:
    path: str
    body: dict
    started: float
    finished: float


@dataclass
class Downstream:
    """A real local HTTP service behind the skills: it records each call's body and when it ran."""

    arrivals: list[Arrival] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def start(self) -> Downstream:
        downstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                started = time.time()
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                time.sleep(DOWNSTREAM_SECONDS)
                answer = json.dumps({"ok": True, "echo": body}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                downstream.arrivals.append(Arrival(self.path, body, started, time.time()))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def downstream(settings) -> Iterator[Downstream]:
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = True
    settings.AIRLOCK_EGRESS_PORTS = None  # any port: the downstream listens on a free one
    service = Downstream().start()
    yield service
    service.stop()


@dataclass
class McpServer:
    url: str
    base_url: str


@pytest.fixture
def mcp_live_server(transactional_db, settings, monkeypatch) -> Iterator[McpServer]:
    """uvicorn serving Django's ASGI handler behind `with_mcp`, as airlock/asgi.py mounts it."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    settings.SECURE_SSL_REDIRECT = False
    settings.AIRLOCK_MCP_APPROVAL_WAIT_SECONDS = 2.0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(with_mcp(ASGIHandler()), lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="mcp-live-server")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("The MCP live server did not start")
        time.sleep(0.02)
    try:
        yield McpServer(url=f"http://127.0.0.1:{port}/mcp", base_url=f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        if hasattr(
            connection, "close_pool"
        ):  # PostgreSQL: idle pooled connections would block dropping the test database
            connection.close_pool()


@asynccontextmanager
async def mcp_client(url: str, key: str, **headers: str):
    """The official MCP client over streamable HTTP, sending the agent's key on every request."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}", **headers}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@pytest.fixture
def catalog(acme, globex, downstream):
    """Acme's support agents may use crm.* and billing.*; the rest is there to be left out of their list."""
    make_skill("crm.lookup_customer", adapter=downstream.url("/lookup"), publish=False)
    make_skill("crm.add_note", effect="write", adapter=downstream.url("/note"), publish=False)
    make_skill("crm.export_everything", effect="read", adapter=downstream.url("/export"), publish=False)
    make_skill("crm.purge_customer", effect="destructive", adapter=downstream.url("/purge"), publish=False)
    make_skill("crm.old_report", status="retired", adapter=downstream.url("/old"), publish=False)
    make_skill("crm.globex_only", tenants=["globex"], adapter=downstream.url("/globex"), publish=False)
    make_skill("crm.local_notes", adapter="client:crm.local_notes", publish=False)
    make_skill("hr.salaries", adapter=downstream.url("/salaries"), publish=False)
    published_policy(
        [rule("no-export", "deny", 'skill.name == "crm.export_everything"', "bulk exports are not allowed")],
        scope="tenant",
        tenant=acme,
    )
    grant(acme, "crm.*")
    grant(globex, "crm.*")
    build_refund_world(acme)  # grants billing.create_refund (needs approval) and iam.revoke_access; publishes
    return publish_snapshot(reason="mcp gateway tests")


@pytest.fixture
def acme_key(acme) -> str:
    return create_agent(tenant=acme, name="support-bot", role="support")[1]


@pytest.fixture
def globex_key(globex) -> str:
    return create_agent(tenant=globex, name="globex-bot", role="support")[1]


@pytest.fixture
def approver_token(approver) -> str:
    return create_personal_token(user=approver, name="mcp tests")[1]


@pytest.fixture
def celery_worker(settings, tmp_path, monkeypatch) -> Iterator[Path]:
    """A real Celery worker process on the test database: it resumes approved calls (the downstream
    refund tool of tests/approvals/worker_tools.py records each real effect in a shared ledger)."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(ledger))
    log = tmp_path / "worker.log"
    celery_app.conf.task_always_eager = False
    celery_app.control.purge()
    worker = start_worker(
        "mcp", log, worker_env(AIRLOCK_TEST_LEDGER=str(ledger)), "--pool=solo", "-I", "tests.approvals.worker_tools"
    )
    try:
        yield log
    finally:
        celery_app.conf.task_always_eager = True
        stop_worker(worker)
