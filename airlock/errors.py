"""The console's 400, 403, 404 and 500 pages (handler400/403/404/500 in airlock.urls); API paths keep JSON
bodies.

A 404 never says why (a missing id and another tenant's id look the same); a 403 names the role and tenant
a page needs and who can grant it; a 500 touches neither the database nor the user, so it renders while
the database is down.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader

from console.api_errors import body_too_large_message, error_body
from console.tenancy import RoleRequired, tenant_admins

JSON_PREFIXES = ("/api/", "/v1/")


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(JSON_PREFIXES)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's refusals of a request before or outside a DRF view (SuspiciousOperation): a body past
    DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 naming the limit; anything else (console.unsafe_input, too many
    fields, a malformed multipart body) a 400 with its reason."""
    if isinstance(exception, RequestDataTooBig):
        status, code, message = 413, "body_too_large", body_too_large_message()
    else:
        status, code, message = 400, "bad_request", str(exception or "") or "The request is malformed."
    if _wants_json(request):
        return JsonResponse(error_body("validation", code, message), status=status)
    return HttpResponse(loader.get_template("400.html").render({"message": message}), status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    message = str(exception or "") or "You may not open this page."
    if _wants_json(request):
        return JsonResponse(error_body("authorization", "permission_denied", message), status=403)
    context = {"message": message}
    if isinstance(exception, RoleRequired):
        context.update(role=exception.role, tenant=exception.tenant, admins=tenant_admins(exception.tenant))
    return render(request, "403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse(error_body("not_found", "not_found", "Not found."), status=404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        body = error_body("internal", "internal", "Airlock hit an internal error; it has been logged.")
        return JsonResponse(body, status=500)
    # No request in the context: context processors read the user and the tenant from the database.
    return HttpResponse(loader.get_template("500.html").render({}), status=500)
