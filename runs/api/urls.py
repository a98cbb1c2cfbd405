from django.urls import path

from runs.api import client_results, events, local_calls, tools, trials, views

app_name = "runs_api"

urlpatterns = [
    path("tools", tools.tool_definitions, name="tools"),
    path("runs", views.run_create, name="run_create"),
    path("runs/<uuid:run_id>", views.run_detail, name="run_detail"),
    path("runs/<uuid:run_id>/calls", views.run_calls, name="run_calls"),
    path("runs/<uuid:run_id>/finish", views.run_finish, name="run_finish"),
    path("runs/<uuid:run_id>/stop", views.run_stop, name="run_stop"),
    path("runs/<uuid:run_id>/local-calls", local_calls.upload_local_calls, name="local_calls"),
    path("runs/<uuid:run_id>/events", events.run_events, name="run_events"),
    path("runs/<uuid:run_id>/calls/<str:call_id>/result", client_results.report_client_result, name="client_result"),
    path("skills/<str:name>/versions/<str:version>/try", trials.version_try, name="version_try"),
    path("skills/<str:name>/versions/<str:version>/tries", trials.version_tries, name="version_tries"),
]
