"""`http(s)://...`: POST the arguments as JSON; 2xx JSON is the content, other statuses map to error classes."""

from __future__ import annotations

import httpx

from lib import egress
from runs.adapters.base import AdapterResult, InvocationContext
from runs.errors import (
    CallError,
    NotFound,
    NotPermitted,
    RateLimited,
    Transient,
    Unavailable,
    ValidationFailed,
    egress_refused,
)
from runs.plane.credentials import attached_headers


def _retry_after(response: httpx.Response) -> int | None:
    try:
        return int(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def error_for_status(response: httpx.Response) -> CallError:
    status = response.status_code
    message = f"The skill's service answered HTTP {status}."
    if status == 429:
        return RateLimited(message, code="downstream_rate_limited", retry_after=_retry_after(response) or 1)
    if status == 404:
        return NotFound(message, code="downstream_not_found")
    if status in (401, 403):
        return NotPermitted(message, code="downstream_forbidden")
    if status in (400, 409, 422):
        return ValidationFailed(message, code="downstream_rejected")
    if status in (502, 503, 504):
        return Transient(message, code="downstream_unavailable", retry_after=_retry_after(response))
    return Unavailable(message, code="downstream_error")


class HttpAdapter:
    def invoke(self, *, manifest: dict, arguments: dict, context: InvocationContext) -> AdapterResult:
        headers = {"X-Airlock-Run": context.run_id, "X-Airlock-Call": context.call_id}
        if context.idempotency_key:
            headers["Idempotency-Key"] = context.idempotency_key
        headers.update(attached_headers())  # the tenant's credential, if the manifest names one
        try:
            with egress.client(timeout=context.timeout_s) as http:
                response = http.post(manifest["execution"]["adapter"], json=arguments, headers=headers)
        except egress.EgressRefused as exc:
            raise egress_refused(exc) from exc
        except httpx.TimeoutException as exc:
            raise Transient("The skill's service did not answer in time.", code="downstream_timeout") from exc
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
            raise Transient("The connection to the skill's service broke mid-call.", code="connection_reset") from exc
        except httpx.TransportError as exc:
            raise Unavailable("The skill's service could not be reached.", code="downstream_unreachable") from exc
        if response.status_code >= 300:
            raise error_for_status(response)
        try:
            content = response.json()
        except ValueError:
            content = response.text
        return AdapterResult(content=content, metadata={"http_status": response.status_code})
