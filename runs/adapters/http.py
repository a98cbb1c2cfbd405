"""`http(s)://...`: POST the arguments as JSON; 2xx JSON is the content, other statuses map to error classes."""

from __future__ import annotations

import httpx

from lib import egress
from runs.adapters.base import AdapterResult, InvocationContext
from runs.errors import CallError, Transient, Unavailable, egress_refused
from runs.plane.credentials import attached_headers
from runs.plane.downstream_errors import HTTP_STATUS_CLASSES, code_of_body, message_of_body, refusal


def _retry_after(response: httpx.Response) -> int | None:
    try:
        return int(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def error_for_status(response: httpx.Response) -> CallError:
    """A status the call cannot use; a 4xx carries the service's own words (a 5xx body is not for the model)."""
    status = response.status_code
    message = f"The skill's service answered HTTP {status}."
    said = message_of_body(response.text, response.headers.get("Content-Type", "")) if 400 <= status < 500 else ""
    own_code = code_of_body(response.text) if status >= 400 else None  # a code is no internal, even in a 5xx
    origin = {"adapter": "http", "source": response.url.host}
    if status == 429:
        return refusal(
            "rate_limited",
            message,
            said=said,
            downstream_code=own_code,
            retry_after=_retry_after(response) or 1,
            **origin,
        )
    if status in HTTP_STATUS_CLASSES:
        return refusal(HTTP_STATUS_CLASSES[status], message, said=said, downstream_code=own_code, **origin)
    if status in (502, 503, 504):
        return Transient(
            message, code="downstream_unavailable", retry_after=_retry_after(response), downstream_code=own_code
        )
    return refusal("unavailable", message, said=said, downstream_code=own_code, **origin)


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
