from django.urls import path

from registry.api import evaluation_views, namespace_views, rollout_views, views

app_name = "registry_api"

urlpatterns = [
    path("snapshots/latest", views.snapshot_latest, name="snapshot-latest"),
    path("snapshots/public-key", views.public_key, name="snapshot-public-key"),
    path("namespaces", namespace_views.namespace_collection, name="namespaces"),
    path("namespaces/<str:namespace>/approve", namespace_views.namespace_approve, name="namespace-approve"),
    path("namespaces/<str:namespace>/decline", namespace_views.namespace_decline, name="namespace-decline"),
    path("evaluations", evaluation_views.evaluation_collection, name="evaluations"),
    path("evaluations/<int:set_id>", evaluation_views.evaluation_detail, name="evaluation-detail"),
    path("evaluations/<int:set_id>/runs", evaluation_views.evaluation_run, name="evaluation-run"),
    path("skills/search", views.skill_search, name="skill-search"),
    path("skills/manifest-schema", views.manifest_schema_view, name="manifest-schema"),
    path("skills/validate", views.validate, name="skill-validate"),
    path("skills", views.skill_collection, name="skills"),
    path("skills/<str:name>", views.skill_detail, name="skill-detail"),
    path("skills/<str:name>/versions", views.version_create, name="version-create"),
    path("skills/<str:name>/versions/<str:version>", views.version_detail, name="version-detail"),
    path("skills/<str:name>/versions/<str:version>/publish", views.version_publish, name="version-publish"),
    path("skills/<str:name>/versions/<str:version>/approve", views.version_approve, name="version-approve"),
    path("skills/<str:name>/versions/<str:version>/rollout", rollout_views.version_rollout, name="version-rollout"),
    path("skills/<str:name>/versions/<str:version>/promote", rollout_views.version_promote, name="version-promote"),
    path("skills/<str:name>/versions/<str:version>/rollback", rollout_views.version_rollback, name="version-rollback"),
    path("skills/<str:name>/deprecate", views.skill_deprecate, name="skill-deprecate"),
    path("skills/<str:name>/retire", views.skill_retire, name="skill-retire"),
    path("skills/<str:name>/diff", views.skill_diff, name="skill-diff"),
]
