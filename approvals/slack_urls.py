from django.urls import path

from approvals import slack_views

app_name = "slack"

urlpatterns = [path("<slug:tenant_slug>/actions", slack_views.actions, name="actions")]
