"""A real local HTTP service and a real MCP server that misbehave on purpose, and skill helpers.

`flaky` is a threaded HTTP server. Each path has a queue of behaviours (`flaky.plan(path, ...)`):
an int status, `("status", code, headers, body)`, `"reset"` (the connection is torn down after the
request is read), `("hold", body)` (answers once the test calls `flaky.release()`), or a dict (200
JSON). When the queue is empty the path's default (`flaky.default(path, ...)`) answers, else 200
`{"ok": true}`. Every request counts (`flaky.hits[path]`, `flaky.keys[path]` with the Idempotency-Key
headers, `flaky.auth`); `flaky.wait_answered(path, n)` waits until n requests to the path have been answered.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from registry.snapshots import publish_snapshot
from tests.runs.factories import grant, run_for


class FlakyService:
    def __init__(self) -> None:
        self.plans: dict[str, list] = defaultdict(list)
        self.defaults: dict[str, object] = {}
        self.hits: Counter = Counter()
        self.keys: dict[str, list[str]] = defaultdict(list)
        self.auth: list[str] = []
        self.answered: Counter = Counter()
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.url = ""

    def plan(self, path: str, *behaviours) -> None:
        self.plans[path].extend(behaviours)

    def default(self, path: str, behaviour) -> None:
        self.defaults[path] = behaviour

    def release(self) -> None:
        """Held requests answer now (a slow service finishing)."""
        self.released.set()

    def wait_answered(self, path: str, count: int = 1, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.answered[path] < count:
            assert time.monotonic() < deadline, f"{path} was answered {self.answered[path]} times, not {count}"
            time.sleep(0.01)

    def next_for(self, path: str):
        with self.lock:
            self.hits[path] += 1
            if self.plans[path]:
                return self.plans[path].pop(0)
            return self.defaults.get(path, {"ok": True})


def _handler(service: FlakyService):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length) if length else b""
            path = unquote(self.path.split("?")[0])
            with service.lock:
                service.keys[path].append(self.headers.get("Idempotency-Key", ""))
                service.auth.append(self.headers.get("Authorization", ""))
            behaviour = service.next_for(path)
            if behaviour == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            status, headers, body = 200, {}, behaviour
            if isinstance(behaviour, int):
                status, body = behaviour, {"error": status}
            elif isinstance(behaviour, tuple) and behaviour[0] == "status":
                _, status, headers, body = behaviour
            elif isinstance(behaviour, tuple) and behaviour[0] == "hold":
                service.released.wait(timeout=30)
                body = behaviour[1]
            elif callable(behaviour):
                status, body = behaviour(self)
            raw = json.dumps(body).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(raw)
            with service.lock:
                service.answered[path] += 1

        do_POST = do_GET = _serve

    return Handler


@pytest.fixture
def flaky():
    service = FlakyService()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    server.daemon_threads = True
    service.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield service
    service.release()
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def mcp_url():
    """A real MCP server over streamable HTTP in a subprocess (tests/reliability/mcp_flaky_server.py)."""
    port = free_port()
    script = Path(__file__).with_name("mcp_flaky_server.py")
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("the MCP test server did not start")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(autouse=True)
def _fast_backoff(settings):
    settings.AIRLOCK_RETRY_BASE_SECONDS, settings.AIRLOCK_RETRY_CAP_SECONDS = 0.02, 0.1
    settings.AIRLOCK_BREAKER_FAILURE_THRESHOLD, settings.AIRLOCK_BREAKER_WINDOW_SECONDS = 3, 30
    settings.AIRLOCK_BREAKER_OPEN_SECONDS, settings.AIRLOCK_BREAKER_PROBE_SECONDS = 0.5, 5
    settings.AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def skill(
    name: str,
    adapter: str,
    *,
    effect: str = "read",
    output_schema: dict | None = None,
    timeout_ms: int = 3000,
    **execution,
):
    """An active skill on `adapter` (extra `execution` fields allowed), owned by support-tools."""
    from console.models import Team
    from registry.models import Skill, SkillVersion
    from tests.runs.factories import manifest as make_manifest

    team = Team.objects.get_or_create(slug="support-tools", defaults={"name": "Support tools"})[0]
    body = make_manifest(name, adapter=adapter, effect=effect, timeout_ms=timeout_ms)
    body["execution"].update(execution)
    if output_schema is not None:
        body["output_schema"] = output_schema
    entry, _ = Skill.objects.get_or_create(
        name=name, defaults={"skill_id": body["skill_id"], "namespace": name.split(".")[0], "owner_team": team}
    )
    return SkillVersion.objects.create(
        skill=entry,
        version="1.0.0",
        major=1,
        status="active",
        manifest=body,
        effect=effect,
        data_classification="internal",
    )


@pytest.fixture
def world(acme, agent, owner_team):
    owner_team.email = "owners@example.com"
    owner_team.save()
    grant(acme, "*")
    return {"acme": acme, "agent": agent}


def bind(tenant, name: str, skill_pattern: str, endpoint: str) -> None:
    """The tenant admin's binding that lets credential `name` go with `skill_pattern` to `endpoint`."""
    from reliability.services import bind_credential

    bind_credential(tenant=tenant, credential_name=name, skill_pattern=skill_pattern, endpoint=endpoint, user=None)


def publish() -> None:
    publish_snapshot(reason="reliability test")


def gate(agent, calls: list[dict], run=None):
    """Run a batch through the real gate; returns (run, results)."""
    from runs.gate import process_batch

    run = run or run_for(agent)
    return run, process_batch(run=run, calls=calls)
