"""The throughput benchmark's URLconf: every URL of the project, plus the bare endpoint (bench/bare.py)
under /api/, so that it passes the same middleware stack as the gate."""

from django.urls import path

from airlock.urls import urlpatterns as project_urlpatterns
from bench.bare import BARE_PATH, bare

urlpatterns = [path(BARE_PATH.lstrip("/"), bare, name="bench-bare"), *project_urlpatterns]
