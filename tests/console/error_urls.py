"""airlock.urls with two views that fail, for the 500 page tests (settings.ROOT_URLCONF points here)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from airlock.urls import handler403, handler404, handler500
from airlock.urls import urlpatterns as airlock_urlpatterns


def fail(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


urlpatterns = [path("fail/", fail), path("api/v1/fail/", fail), *airlock_urlpatterns]

__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]
