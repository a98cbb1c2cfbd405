"""A small, deliberately unreliable downstream service the simulated skills call over `http:`.

- `/check_stock`: flaky; every second request answers 503 (the gate reports `transient`).
- `/quote_rates`: rate limited; a second request within a second answers 429 with Retry-After.
- `/book_courier`: slow on the first attempt of each idempotency key (longer than the skill's
  timeout, so the gate reports `timeout_unknown`), yet the booking is made; a repeat with the
  same key returns that booking, which is how an agent reconciles an unknown outcome.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW_SECONDS = 2.0


class DownstreamState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stock_requests = itertools.count(1)
        self.last_quote = 0.0
        self.bookings: dict[str, dict] = {}


class Handler(BaseHTTPRequestHandler):
    state: DownstreamState

    def log_message(self, format: str, *args) -> None:  # quiet: the simulator prints its own lines
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the gate gave up (timeout_unknown)
            self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        arguments = json.loads(self.rfile.read(length) or b"{}")
        route = self.path.rstrip("/").rsplit("/", 1)[-1]
        handler = {
            "check_stock": self.check_stock,
            "quote_rates": self.quote_rates,
            "book_courier": self.book_courier,
        }.get(route)
        if handler is None:
            self._send(404, {"error": f"no route {self.path}"})
            return
        handler(arguments)

    def check_stock(self, arguments: dict) -> None:
        if next(self.state.stock_requests) % 2 == 0:
            self._send(503, {"error": "inventory service is restarting"})
            return
        sku = arguments.get("sku", "")
        self._send(200, {"sku": sku, "in_stock": sum(map(ord, sku)) % 17, "warehouse": "ams-1"})

    def quote_rates(self, arguments: dict) -> None:
        with self.state.lock:
            now = time.monotonic()
            limited = now - self.state.last_quote < 1.0
            if not limited:
                self.state.last_quote = now
        if limited:
            self._send(429, {"error": "slow down"}, {"Retry-After": "1"})
            return
        self._send(
            200,
            {
                "destination": arguments.get("destination"),
                "quotes": [{"carrier": "PostNL", "price_cents": 695}, {"carrier": "DHL", "price_cents": 899}],
            },
        )

    def book_courier(self, arguments: dict) -> None:
        key = self.headers.get("Idempotency-Key") or json.dumps(arguments, sort_keys=True)
        with self.state.lock:
            booking = self.state.bookings.get(key)
            first = booking is None
            if first:
                booking = self.state.bookings[key] = {
                    "booking_id": f"bk-{len(self.state.bookings) + 1:04d}",
                    "order_id": arguments.get("order_id"),
                    "pickup": arguments.get("pickup_date"),
                    "status": "booked",
                }
        if first:
            time.sleep(SLOW_SECONDS)
        self._send(200, booking)


def start_downstream(port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": DownstreamState()})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="sim-downstream", daemon=True).start()
    return server
