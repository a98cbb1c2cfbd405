"""The Content-Security-Policy of every console page (django-csp), with two per-request additions.

The policy itself is CONTENT_SECURITY_POLICY in settings: scripts, styles, frames and forms from this
origin only, no inline script or style. This middleware adds what a static setting cannot say:

- connect-src gets the websocket form of this very origin (`ws://host` or `wss://host`, the Host
  already checked against ALLOWED_HOSTS), for the live inbox at /ws/approvals/;
- the API reference page (drf-spectacular's Redoc, its script vendored by drf-spectacular-sidecar and
  served from this origin) styles itself inline, draws icons from data: URLs and runs its search in a blob:
  worker; that one page, which shows only the public OpenAPI schema, gets those, and nothing from elsewhere.

A JSON answer gets no policy: a browser never renders it as a page (every answer carries
`X-Content-Type-Options: nosniff`), and building the header was the largest part of the middleware's
cost on the agents' API (docs/performance.md, "Serving model").
"""

from __future__ import annotations

from csp.middleware import CSPMiddleware, PolicyParts
from django.http import HttpRequest, HttpResponseBase

PAGE_POLICIES: dict[str, dict[str, list[str]]] = {
    "api-docs": {
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "font-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "worker-src": ["'self'", "blob:"],
    },
}


class ConsoleCSPMiddleware(CSPMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        return super().process_response(request, response)

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only:
            return parts
        update = dict(parts.update or {})
        try:
            host = request.get_host()
        except Exception:  # DisallowedHost: Django answers 400 anyway; the base policy still applies
            host = ""
        if host:
            websocket = f"{'wss' if request.is_secure() else 'ws'}://{host}"
            update["connect-src"] = [*update.get("connect-src", []), websocket]
        match = getattr(request, "resolver_match", None)
        page_policy = PAGE_POLICIES.get(match.view_name if match else "")
        if page_policy:
            parts.replace = {**(parts.replace or {}), **page_policy}
        parts.update = update
        return parts
