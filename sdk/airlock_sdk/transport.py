"""HTTP transport: one httpx client, typed failures, and retries only where repeating is safe.

A request that never left (connection refused, connect timeout) may always be repeated.
A request that was sent and got no answer is repeated only when the caller says it is safe
(GETs, or a POST whose effect is idempotent on the server); otherwise the failure is raised
with `sent=True`, so the caller can reconcile instead of acting twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import httpx

from airlock_sdk import __version__
from airlock_sdk.errors import (
    APIError,
    AuthenticationError,
    ControlPlaneUnavailable,
    NotFound,
    PermissionDenied,
    RateLimited,
    TransportError,
)

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
RETRY_STATUSES = {502, 503, 504}
MAX_RETRY_AFTER = 5.0


class Transport:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.2,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.client = client or httpx.Client(timeout=timeout)
        self.unreachable = False  # the last request found Airlock unreachable (or answering 5xx)
        self.on_answer: Callable[..., None] | None = None  # SpoolUploader.answered, set by the client
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": f"airlock-sdk/{__version__}",
            "Accept": "application/json",
        }

    def close(self) -> None:
        self.client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        safe: bool,
        json: Any = None,
        params: dict | None = None,
        headers: dict | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        url = path if path.startswith("http") else f"{self.base_url}{path}"
        merged = {**self.headers, **(headers or {})}
        extra = {"timeout": timeout} if timeout is not None else {}
        attempt = 0
        while True:
            attempt += 1
            last = attempt > self.retries
            try:
                response = self.client.request(method, url, json=json, params=params, headers=merged, **extra)
            except NOT_SENT as exc:
                if last:
                    self.unreachable = True
                    raise ControlPlaneUnavailable(
                        f"Airlock at {self.base_url} is unreachable: {exc}", sent=False
                    ) from exc
            except httpx.TransportError as exc:
                if last or not safe:
                    raise TransportError(
                        f"{method} {path} got no answer ({type(exc).__name__}: {exc}); it may have been processed",
                        sent=True,
                    ) from exc
            else:
                if response.status_code in RETRY_STATUSES and safe and not last:
                    pass
                elif response.status_code == 429 and safe and not last and _retry_after(response) <= MAX_RETRY_AFTER:
                    time.sleep(_retry_after(response))
                    continue
                else:
                    self._answered(response.status_code)
                    return response
            time.sleep(self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random()))

    def _answered(self, status: int) -> None:
        """Airlock answered: tell the spool's uploader, once it is back after being unreachable."""
        was_unreachable, self.unreachable = self.unreachable, status in RETRY_STATUSES
        if self.on_answer is not None and not self.unreachable:
            self.on_answer(was_unreachable=was_unreachable)

    def json(self, method: str, path: str, *, safe: bool, expect: tuple[int, ...] = (200, 201), **kwargs) -> Any:
        response = self.request(method, path, safe=safe, **kwargs)
        raise_for_error(response, expect=expect)
        return response.json() if response.content else None


def _retry_after(response: httpx.Response) -> float:
    try:
        return float(response.headers.get("Retry-After", "1"))
    except ValueError:
        return 1.0


def raise_for_error(response: httpx.Response, *, expect: tuple[int, ...] = (200, 201)) -> None:
    if response.status_code in expect:
        return
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    error.setdefault("message", response.text[:300])
    if response.status_code in RETRY_STATUSES:
        raise ControlPlaneUnavailable(f"Airlock answered {response.status_code}: {error.get('message')}", sent=True)
    if response.status_code == 429 and "retry_after" not in error:
        error["retry_after"] = _retry_after(response)
    exception = {401: AuthenticationError, 403: PermissionDenied, 404: NotFound, 429: RateLimited}.get(
        response.status_code, APIError
    )
    raise exception(response.status_code, error)
