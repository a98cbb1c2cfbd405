from django.urls import path

from traces import views

app_name = "traces"

urlpatterns = [
    path("", views.trace_list, name="list"),
    path("<id:pk>/", views.trace_detail, name="detail"),
    path("runs/<uuid:run_id>/", views.trace_for_run, name="for_run"),
    path("<id:pk>/spans/<str:span_id>/", views.span_detail, name="span"),
    path("<id:pk>/calls/<id:call_pk>/why/", views.call_why, name="why"),
    path("alerts/", views.alert_list, name="alerts"),
    path("rules/<id:rule_id>/delete/", views.rule_delete, name="rule_delete"),
    path("skills/<str:skill_name>/", views.skill_detail, name="skill"),
    path("skills/<str:skill_name>/rules/", views.rule_create, name="rule_create"),
    path("t/<slug:tenant_slug>/settings/", views.tenant_settings, name="settings"),
]
