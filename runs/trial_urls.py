from django.urls import path

from runs import trial_views

app_name = "trials"

urlpatterns = [
    path("skills/<str:name>/<str:version>/try/", trial_views.version_try_page, name="try"),
    path("skills/<str:name>/<str:version>/try/run/", trial_views.version_try_run, name="run"),
    path("skills/<str:name>/<str:version>/tests/run/", trial_views.version_tests_run, name="tests"),
]
