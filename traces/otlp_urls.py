"""The standard OTLP/HTTP path (`POST /v1/traces`), mounted at the site root."""

urlpatterns: list = []
