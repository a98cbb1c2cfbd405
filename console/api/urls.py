from django.urls import path

from console.api import incidents, views

urlpatterns = [
    path("agent", views.whoami, name="agent-whoami"),
    path("agents/<id:agent_id>/suspend", incidents.agent_suspend, name="agent-suspend"),
    path("agents/<id:agent_id>/resume", incidents.agent_resume, name="agent-resume"),
    path("tenants/<slug:tenant_slug>/freeze", incidents.tenant_freeze, name="tenant-freeze"),
    path("tenants/<slug:tenant_slug>/unfreeze", incidents.tenant_unfreeze, name="tenant-unfreeze"),
]
