from django.urls import path

from console.api import views

urlpatterns = [
    path("agent", views.whoami, name="agent-whoami"),
]
