"""One JSON error shape for the whole API: {"error": {"class", "code", "message", ...}}."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
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
    413: "validation",
    415: "validation",
    422: "validation",
    429: "rate_limited",
}


class ProblemSerializer(serializers.Serializer):
    """One finding about a manifest (an error or a lint warning), at a JSON path of it."""

    path = serializers.CharField(help_text="JSON path in the manifest, as `$.input_schema.properties.q`.")
    code = serializers.CharField()
    message = serializers.CharField()


class ErrorDetailSerializer(serializers.Serializer):
    error_class = serializers.CharField(
        help_text="The kind of error, what a client branches on: validation, authentication, authorization, "
        "not_found, conflict, rate_limited, internal (and a call's classes, as expired, on a call's route)."
    )
    code = serializers.CharField(help_text="A stable machine-readable reason, as `run_closed` or `invalid_key`.")
    message = serializers.CharField(help_text="A sentence for a person.")
    fields = serializers.JSONField(
        required=False,
        help_text="What is wrong with each part of the request: DRF's "
        "messages keyed (and nested) as the body is, or a list of {field, message}.",
    )
    errors = ProblemSerializer(many=True, required=False, help_text="A refused manifest's findings.")
    retry_after = serializers.IntegerField(required=False, help_text="Seconds to wait before trying again.")
    required_scope = serializers.CharField(required=False, help_text="The personal-token scope this needs.")

    def get_fields(self) -> dict:
        fields = super().get_fields()
        fields["class"] = fields.pop("error_class")  # `class` is a Python keyword
        return fields


class ErrorSerializer(serializers.Serializer):
    """Every API error: `{"error": {"class", "code", "message", ...}}` (error_body, exception_handler)."""

    error = ErrorDetailSerializer()
    warnings = ProblemSerializer(many=True, required=False, help_text="A refused manifest's lint warnings.")


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error responses of an operation, for `@extend_schema(responses={..., **error_responses(400, 409)})`."""
    return {
        code: OpenApiResponse(ErrorSerializer, description=ERROR_CLASS_BY_STATUS.get(code, "internal"))
        for code in statuses
    }


def error_body(error_class: str, code: str, message: str, **extra: Any) -> dict:
    return {"error": {"class": error_class, "code": code, "message": message, **extra}}


def invalid_body(serializer: serializers.Serializer, code: str, message: str = "The request is not valid.") -> Response:
    """400 for a body its serializer refused, keeping the operation's own error code; `fields` as DRF gives them."""
    return Response(
        error_body("validation", code, message, fields=serializer.errors), status=status.HTTP_400_BAD_REQUEST
    )


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "body_too_large"


def body_too_large_message() -> str:
    """Why a body past DATA_UPLOAD_MAX_MEMORY_SIZE was refused, for the API and the console alike."""
    return f"The request body is over the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, RequestDataTooBig):  # raised by request.data, inside the view
        exc = BodyTooLarge(body_too_large_message())
    elif isinstance(exc, SuspiciousOperation):  # Django's other refusals of a request (too many fields, ...)
        exc = exceptions.ParseError(str(exc) or None)
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
