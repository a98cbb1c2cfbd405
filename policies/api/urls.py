from django.urls import path  # noqa: F401

app_name = "policies_api"

urlpatterns: list = []
