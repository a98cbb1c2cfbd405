from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from console import views

console_patterns = [
    path("", views.home, name="home"),
    path("login/", views.AirlockLoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("tenant/switch/", views.switch_tenant, name="switch_tenant"),
    path("t/<slug:tenant_slug>/members/", views.member_list, name="member_list"),
    path("t/<slug:tenant_slug>/invitations/", views.invitation_create, name="invitation_create"),
    path("t/<slug:tenant_slug>/invitations/<int:invitation_id>/revoke/", views.invitation_revoke,
         name="invitation_revoke"),
    path("invitations/<int:invitation_id>/accept/", views.invitation_accept, name="invitation_accept"),
    path("invitations/<int:invitation_id>/decline/", views.invitation_decline, name="invitation_decline"),
    path("invitations/open/<str:token>/", views.invitation_open, name="invitation_open"),
    path("t/<slug:tenant_slug>/members/<int:user_id>/", views.member_edit, name="member_edit"),
    path("t/<slug:tenant_slug>/agents/", views.agent_list, name="agent_list"),
    path("t/<slug:tenant_slug>/agents/new/", views.agent_create, name="agent_create"),
    path("t/<slug:tenant_slug>/agents/<int:agent_id>/revoke/", views.agent_revoke, name="agent_revoke"),
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]

api_v1 = [
    path("", include("console.api.urls")),
    path("", include("registry.api.urls")),
    path("", include("policies.api.urls")),
    path("", include("runs.api.urls")),
    path("", include("approvals.api.urls")),
    path("", include("traces.api.urls")),
    path("", include("reliability.api_urls")),
]

urlpatterns = [
    path("", include((console_patterns, "console"))),
    path("healthz", views.healthz, name="healthz"),
    path("v1/", include("traces.otlp_urls")),
    path("registry/", include("registry.urls")),
    path("policies/", include("policies.urls")),
    path("runs/", include("runs.urls")),
    path("approvals/", include("approvals.urls")),
    path("traces/", include("traces.urls")),
    path("reliability/", include("reliability.urls")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
]
