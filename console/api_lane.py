"""The API lane: key-authenticated calls to the hottest API views skip the console's middleware.

Sessions, CSRF, messages, the console's Content-Security-Policy, htmx, the tenant switcher and login
throttling serve people in browsers. A request that carries `Authorization: Bearer …` to a view marked
with `@api_lane` uses none of them: DRF authenticates it by its key and exempts it from CSRF (a key is
not ambient authority). Such requests go from here (after SecurityMiddleware: HTTPS redirect, HSTS,
nosniff) straight to the view, through CommonMiddleware and X-Frame-Options only, and get the same 404
and 500 handling as any other request. Everything else, with a cookie or not, takes the whole stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.urls import Resolver404, get_resolver

LANE_ATTRIBUTE = "airlock_api_lane"


def api_lane(view: Callable) -> Callable:
    """Mark a synchronous API view whose key-authenticated requests may take the API lane."""
    setattr(view, LANE_ATTRIBUTE, True)
    return view


class ApiLaneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        lane: Callable[[HttpRequest], HttpResponse] = convert_exception_to_response(_call_view)
        for middleware in (XFrameOptionsMiddleware, CommonMiddleware):  # innermost first
            lane = convert_exception_to_response(middleware(lane))
        self.lane = lane

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith("/api/") and request.headers.get("Authorization", "").startswith("Bearer "):
            try:
                match = get_resolver(getattr(request, "urlconf", None)).resolve(request.path_info)
            except Resolver404:
                match = None
            if match is not None and getattr(match.func, LANE_ATTRIBUTE, False):
                request.resolver_match = match
                return self.lane(request)
        return self.get_response(request)


def _call_view(request: HttpRequest) -> HttpResponse:
    match = request.resolver_match
    response: Any = match.func(request, *match.args, **match.kwargs)
    if hasattr(response, "render") and callable(response.render):  # DRF's Response renders late
        response = response.render()
    return response


__all__ = ["ApiLaneMiddleware", "api_lane"]
