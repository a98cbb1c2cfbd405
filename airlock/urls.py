"""The root URLconf: every app's pages and APIs, mounted once. Only this package imports every app."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from airlock import errors, views
from console import urls as console_urls
from console import views as console_views

# The agents' API first, and the gate's routes first in it: Django tries patterns in order, and each miss
# on the way to the gate cost its calls time.
api_v1 = [
    path("", include("runs.api.urls")),
    path("", include("console.api.urls")),
    path("", include("registry.api.urls")),
    path("", include("policies.api.urls")),
    path("", include("approvals.api.urls")),
    path("", include("traces.api.urls")),
    path("", include("reliability.api_urls")),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("", include(([path("", views.home, name="home"), *console_urls.urlpatterns], "console"))),
    path("healthz", console_views.healthz, name="healthz"),
    path("v1/", include("traces.otlp_urls")),
    path("registry/", include("runs.trial_urls")),  # a version's try page, beside its registry pages
    path("registry/", include("registry.urls")),
    path("policies/", include("runs.grant_urls")),  # a grant's page and revocation preview, beside the grants
    path("policies/", include("policies.urls")),
    path("runs/", include("runs.urls")),
    path("approvals/", include("approvals.urls")),
    path("integrations/slack/", include("approvals.slack_urls")),
    path("traces/", include("traces.urls")),
    path("reliability/", include("reliability.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
]

handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.page_not_found
handler500 = errors.server_error
