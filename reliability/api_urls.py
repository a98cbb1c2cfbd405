from django.urls import path

from reliability import api

app_name = "reliability_api"

urlpatterns = [
    path("runs/<uuid:run_id>/pipelines", api.pipeline_submit, name="pipeline_submit"),
    path("runs/<uuid:run_id>/pipelines/<str:pipeline_id>", api.pipeline_detail, name="pipeline_detail"),
    path("jobs/<str:token>/complete", api.job_complete, name="job_complete"),
]
