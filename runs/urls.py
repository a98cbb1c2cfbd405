from django.urls import path

from runs import views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("<uuid:run_id>/", views.run_detail, name="run_detail"),
    path("<uuid:run_id>/stop/", views.run_stop, name="run_stop"),
]
