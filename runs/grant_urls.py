from django.urls import path

from runs import grant_views

app_name = "grants"

urlpatterns = [
    path("t/<slug:tenant_slug>/grants/<id:grant_id>/", grant_views.grant_detail, name="grant_detail"),
]
