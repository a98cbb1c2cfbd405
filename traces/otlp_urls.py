"""The standard OTLP/HTTP path (`POST /v1/traces`), mounted at the site root."""

from django.urls import path

from traces.api import views

app_name = "otlp"

urlpatterns = [
    path("traces", views.otlp_traces, name="traces"),
]
