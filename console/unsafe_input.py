"""Refuse a NUL or a lone surrogate in the path, a query parameter or a form field before any view sees it.

PostgreSQL stores neither (psycopg refuses a NUL in a text parameter; a surrogate cannot be encoded as
UTF-8), so a view that looks such a value up would fail with a 500. No identifier, slug, skill name or
filter Airlock accepts can hold one, so the request is malformed: a 400 through handler400, the same
way Django refuses other malformed requests (SuspiciousOperation). Form fields are only read for a POST
with a form content type, as Django (and the CSRF check after this) reads them anyway; JSON bodies are
the API's serializers' to refuse.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse

UNSAFE_CHARACTERS = re.compile("[\x00\ud800-\udfff]")


class UnsafeInput(SuspiciousOperation):
    """A NUL or a lone surrogate in the path, a query parameter or a form field."""


def unsafe_part(request: HttpRequest) -> str | None:
    """Which part of the request holds an unsafe character ("path", "query parameter 'q'", "form field
    'tenant'"), or None."""
    if UNSAFE_CHARACTERS.search(request.path_info):
        return "path"
    for kind, fields in (("query parameter", request.GET), ("form field", request.POST)):
        for name, values in fields.lists():
            if UNSAFE_CHARACTERS.search(name) or any(UNSAFE_CHARACTERS.search(value) for value in values):
                return f"{kind} {name!r}"
    return None


class UnsafeInputMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        part = unsafe_part(request)
        if part is not None:
            raise UnsafeInput(f"The {part} holds a NUL or a lone surrogate character, which Airlock never accepts.")
        return self.get_response(request)
