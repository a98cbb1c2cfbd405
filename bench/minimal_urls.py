"""The minimal app's only URL: the bare endpoint (bench/minimal_settings.py)."""

from django.urls import path

from bench.bare import BARE_PATH, bare

urlpatterns = [path(BARE_PATH.lstrip("/"), bare)]
