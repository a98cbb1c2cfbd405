"""A scripted Airlock for SDK tests that need no server: an httpx.MockTransport with routes."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
from airlock_sdk import Airlock, ClientSkillRegistry

Handler = Callable[[httpx.Request], httpx.Response]


class FakeAirlock:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Handler | httpx.Response | Exception]] = {}
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, *responses: Handler | httpx.Response | Exception) -> None:
        self.routes.setdefault((method, path), []).extend(responses)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queue = self.routes.get((request.method, request.url.path))
        if not queue:
            return httpx.Response(404, json={"error": {"class": "not_found", "code": "no_route", "message": "?"}})
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item(request) if callable(item) else item

    def sent(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def client(self, tmp_path, **kwargs) -> Airlock:
        kwargs.setdefault("client_skills", ClientSkillRegistry())
        return Airlock(
            "http://airlock.test",
            "ak_test_key",
            cache_dir=tmp_path,
            retries=2,
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
            **kwargs,
        )


def body(request: httpx.Request) -> dict:
    return json.loads(request.content)
