"""Asking a tool about earlier work: the outcome of an idempotency key, or the state of a job.

The manifest declares where: `execution.reconcile` and `execution.job_status`, each either an
http(s) URL template (GET; `{idempotency_key}` or `{job_id}` filled in, URL-quoted) or an
`mcp://<server>/<tool>` called with `{"idempotency_key": ...}` or `{"job_id": ...}`. The answer is
`{"status": "succeeded" | "failed" | "running" | "pending" | "not_found", "result": ...}`; an HTTP
404 means "not_found" (the tool never saw the key).
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

from lib import egress
from runs.adapters.http import error_for_status
from runs.errors import Transient, Unavailable, egress_refused
from runs.plane.credentials import resolve_headers
from runs.plane.mcp_servers import call_tool, connection_for, owning_team, parse

ASK_TIMEOUT_S = 10.0


def ask(*, manifest: dict, target: str, field: str, value: str, tenant_slug: str, end_user: str = "") -> dict:
    headers = resolve_headers(manifest=manifest, tenant_slug=tenant_slug, end_user=end_user, target=target)
    if target.startswith(("http://", "https://")):
        url = target.replace("{" + field + "}", quote(value, safe=""))
        try:
            with egress.client(timeout=ASK_TIMEOUT_S) as http:
                response = http.get(url, headers=headers)
        except egress.EgressRefused as exc:
            raise egress_refused(exc) from exc
        except httpx.TimeoutException as exc:
            raise Transient("The tool did not answer the status check in time.", code="downstream_timeout") from exc
        except httpx.TransportError as exc:
            raise Unavailable(
                "The tool could not be reached for a status check.", code="downstream_unreachable"
            ) from exc
        if response.status_code == 404:
            return {"status": "not_found"}
        if response.status_code >= 300:
            raise error_for_status(response)
        answer = response.json()
    elif target.startswith("mcp://"):
        answer = call_tool(
            connection_for(target, team=owning_team(manifest)),
            parse(target)[1],
            {field: value},
            headers=headers,
            timeout_s=ASK_TIMEOUT_S,
        )
    else:
        raise Unavailable("The skill declares no way to ask about earlier work.", code="no_status_endpoint")
    if not isinstance(answer, dict) or not isinstance(answer.get("status"), str):
        raise Unavailable("The tool's status answer has no status.", code="bad_status_answer")
    return answer
