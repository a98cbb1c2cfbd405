from django.urls import path  # noqa: F401

app_name = "registry_api"

urlpatterns: list = []
