"""A real HTTP server on 127.0.0.1 that records every request it receives (path, headers, body).

Used as a tenant's genuine downstream and as an attacker's listener: the tests count what reached it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class Listener:
    answer: dict = field(default_factory=lambda: {"results": []})
    requests: list[Received] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def authorizations(self) -> list[str]:
        return [r.headers.get("authorization", "") for r in self.requests]


def _handler(listener: Listener):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode(errors="replace") if length else ""
            with listener.lock:
                listener.requests.append(
                    Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
            raw = json.dumps(listener.answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _serve

    return Handler


def start_listener() -> tuple[Listener, ThreadingHTTPServer]:
    listener = Listener()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(listener))
    server.daemon_threads = True
    listener.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return listener, server
