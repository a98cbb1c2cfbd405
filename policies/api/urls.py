from django.urls import path

from policies.api import views

app_name = "policies_api"

urlpatterns = [
    path("tenants/<slug:tenant_slug>/grants", views.tenant_grants, name="tenant_grants"),
    path("grants/<id:grant_id>/revoke", views.grant_revoke, name="grant_revoke"),
    path("tenants/<slug:tenant_slug>/local-decisions", views.tenant_local_decisions, name="tenant_local_decisions"),
    path("decision-bundle", views.decision_bundle, name="decision_bundle"),
]
