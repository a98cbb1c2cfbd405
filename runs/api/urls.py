from django.urls import path  # noqa: F401

app_name = "runs_api"

urlpatterns: list = []
