"""One JSON error shape for the whole API: {"error": {"class", "code", "message", ...}}."""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)

ERROR_CLASS_BY_STATUS = {
    400: "validation",
    401: "authentication",
    403: "authorization",
    404: "not_found",
    405: "validation",
    409: "conflict",
    415: "validation",
    422: "validation",
    429: "rate_limited",
}


def error_body(error_class: str, code: str, message: str, **extra: Any) -> dict:
    return {"error": {"class": error_class, "code": code, "message": message, **extra}}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("Unhandled API error", exc_info=exc)
        return Response(
            error_body("internal", "internal", "Airlock hit an internal error; it has been logged."),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    error_class = ERROR_CLASS_BY_STATUS.get(response.status_code, "internal")
    code = getattr(exc, "default_code", "error")
    detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else code
    if isinstance(detail, dict | list):
        body = error_body(error_class, code, "The request is not valid.", fields=detail)
    else:
        body = error_body(error_class, code, str(detail))
    if isinstance(exc, exceptions.APIException) and getattr(exc, "wait", None) is not None:  # throttled, key guessing
        body["error"]["retry_after"] = int(exc.wait)
    if getattr(exc, "scope", None):  # console.api_auth.MissingScope
        body["error"]["required_scope"] = exc.scope
    response.data = body
    return response
