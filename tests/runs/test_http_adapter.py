"""The http(s):// adapter against a real loopback server: JSON in, JSON out, statuses to error classes."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runs.models import ToolCall
from tests.runs.conftest import call, post_calls, start_run
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db

SEEN: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append({"body": body, "key": self.headers.get("Idempotency-Key"), "path": self.path})
        status = {"/ok": 200, "/busy": 503, "/slow-down": 429, "/bad": 422, "/boom": 500}[self.path]
        payload = json.dumps({"received": body}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if status == 429:
            self.send_header("Retry-After", "7")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    SEEN.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.parametrize(
    "path,effect,status,error_class",
    [
        ("/ok", "write", "ok", None),
        ("/busy", "read", "error", "transient"),
        ("/slow-down", "read", "error", "rate_limited"),
        ("/bad", "read", "error", "validation"),
        ("/boom", "read", "error", "unavailable"),
    ],
)
def test_http_adapter(agent_client, acme, server, path, effect, status, error_class):
    make_skill("remote.thing", effect=effect, adapter=f"{server}{path}")
    grant(acme, "remote.*")
    run = start_run(agent_client)
    result = post_calls(agent_client, run["run_id"], [call("c1", "remote.thing", {"n": 1})]).json()["results"][0]
    assert result["status"] == status
    if status == "ok":
        assert result["content"] == {"received": {"n": 1}}
        assert SEEN[0]["key"] == f"{run['run_id']}:c1"  # mutating calls carry their idempotency key
    else:
        assert result["error"]["class"] == error_class
        assert ToolCall.objects.get(call_id="c1").error_class == error_class
    if path == "/slow-down":
        assert result["error"]["retry_after"] == 7
