from django.urls import path

from approvals.api import decisions, views

app_name = "approvals_api"

urlpatterns = [
    path("approvals", views.approval_list, name="approval_list"),
    path("approvals/<id:approval_id>", views.approval_detail, name="approval_detail"),
    path("approvals/<id:approval_id>/decision", views.approval_decision, name="approval_decision"),
    path("decisions", decisions.DecisionList.as_view(), name="decision_list"),
    path("approvals/<id:approval_id>/cancel", views.approval_cancel, name="approval_cancel"),
]
