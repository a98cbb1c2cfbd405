from django.urls import path

from approvals.api import decisions, routing, views

app_name = "approvals_api"

urlpatterns = [
    path("approvals", views.approval_list, name="approval_list"),
    path("approvals/<id:approval_id>", views.approval_detail, name="approval_detail"),
    path("approvals/<id:approval_id>/decision", views.approval_decision, name="approval_decision"),
    path("decisions", decisions.DecisionList.as_view(), name="decision_list"),
    path("approvals/<id:approval_id>/cancel", views.approval_cancel, name="approval_cancel"),
    path("tenants/<slug:tenant_slug>/approval-groups", routing.tenant_groups, name="approval_groups"),
    path("approval-groups/<id:group_id>", routing.group_detail, name="approval_group"),
    path("approval-groups/<id:group_id>/members", routing.group_members, name="approval_group_members"),
    path("tenants/<slug:tenant_slug>/approval-routes", routing.tenant_routes, name="approval_routes"),
    path("tenants/<slug:tenant_slug>/approval-routes/preview", routing.route_preview, name="approval_route_preview"),
    path("approval-routes/<id:route_id>", routing.route_detail, name="approval_route"),
    path("approval-routes/<id:route_id>/move", routing.route_move, name="approval_route_move"),
]
