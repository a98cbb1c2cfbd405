from django.urls import path

from registry import evaluation_views, rollout_views, views

app_name = "registry"

urlpatterns = [
    path("", views.catalog, name="catalog"),
    path("new/", views.skill_new, name="skill_new"),
    path("validate/", views.validate_manifest_view, name="validate"),
    path("import/", views.import_mcp, name="import_mcp"),
    path("namespaces/", views.namespace_list, name="namespaces"),
    path("namespaces/<str:namespace>/decide/", views.namespace_decide, name="namespace_decide"),
    path("evaluations/", evaluation_views.evaluation_list, name="evaluations"),
    path("evaluations/<int:set_id>/", evaluation_views.evaluation_detail, name="evaluation"),
    path("evaluations/<int:set_id>/run/", evaluation_views.evaluation_run, name="evaluation_run"),
    path("evaluations/<int:set_id>/searches/", evaluation_views.evaluation_add_search, name="evaluation_add_search"),
    path("skills/<str:name>/", views.skill_detail, name="skill"),
    path("skills/<str:name>/diff/", views.skill_diff, name="diff"),
    path("skills/<str:name>/versions/new/", views.version_new, name="version_new"),
    path("skills/<str:name>/deprecate/", views.skill_deprecate, name="deprecate"),
    path("skills/<str:name>/retire/", views.skill_retire, name="retire"),
    path("skills/<str:name>/<str:version>/publish/", views.version_publish, name="publish"),
    path("skills/<str:name>/<str:version>/rollout/", rollout_views.version_rollout, name="rollout"),
    path("skills/<str:name>/<str:version>/promote/", rollout_views.version_promote, name="promote"),
    path("skills/<str:name>/<str:version>/rollback/", rollout_views.version_rollback, name="rollback"),
    path("skills/<str:name>/<str:version>/review/", views.version_review, name="review"),
    path("skills/<str:name>/<str:version>/approve/", views.version_approve, name="approve"),
    path("skills/<str:name>/<str:version>/confirm/", views.version_confirm, name="confirm"),
]
