from django.urls import path

from policies import views

app_name = "policies"

urlpatterns = [
    path("", views.policy_list, name="policy_list"),
    path("new/", views.policy_create, name="policy_create"),
    path("check/", views.condition_check, name="condition_check"),
    path("<id:policy_id>/", views.policy_detail, name="policy_detail"),
    path("<id:policy_id>/draft/", views.draft_save, name="draft_save"),
    path("<id:policy_id>/simulate/", views.simulate, name="simulate"),
    path("<id:policy_id>/publish/", views.publish, name="publish"),
    path("<id:policy_id>/tests/", views.test_add, name="test_add"),
    path("<id:policy_id>/versions/<id:version_id>/rollback/", views.rollback, name="rollback"),
    path("t/<slug:tenant_slug>/grants/", views.grant_list, name="grant_list"),
    path("t/<slug:tenant_slug>/grants/new/", views.grant_create, name="grant_create"),
    path("t/<slug:tenant_slug>/grants/preview/", views.grant_preview, name="grant_preview"),
    path("t/<slug:tenant_slug>/grants/<id:grant_id>/revoke/", views.grant_revoke, name="grant_revoke"),
    path("t/<slug:tenant_slug>/local-decisions/", views.local_decisions_save, name="local_decisions_save"),
]
