from django.urls import path

from reliability import views

app_name = "reliability"

urlpatterns = [
    path("reconciliation/", views.reconciliation_list, name="reconciliation_list"),
    path("reconciliation/<id:item_id>/", views.reconciliation_detail, name="reconciliation_detail"),
    path("reconciliation/<id:item_id>/resolve/", views.reconciliation_resolve, name="reconciliation_resolve"),
    path("t/<slug:tenant_slug>/credentials/", views.credential_list, name="credential_list"),
    path(
        "t/<slug:tenant_slug>/credentials/<id:credential_id>/delete/",
        views.credential_delete,
        name="credential_delete",
    ),
    path("t/<slug:tenant_slug>/credentials/<id:credential_id>/bind/", views.credential_bind, name="credential_bind"),
    path(
        "t/<slug:tenant_slug>/credential-bindings/<id:binding_id>/delete/",
        views.credential_unbind,
        name="credential_unbind",
    ),
    path("mcp-servers/", views.mcp_server_list, name="mcp_server_list"),
    path("mcp-servers/propose/", views.mcp_server_propose, name="mcp_server_propose"),
    path("mcp-servers/<id:server_id>/review/", views.mcp_server_review, name="mcp_server_review"),
    path("mcp-servers/<id:server_id>/import/", views.mcp_server_import, name="mcp_server_import"),
    path("mcp-servers/<id:server_id>/share/", views.mcp_server_share, name="mcp_server_share"),
    path("mcp-servers/<id:server_id>/unshare/", views.mcp_server_unshare, name="mcp_server_unshare"),
    path(
        "mcp-servers/<id:server_id>/tools/<str:tool>/approve-change/",
        views.mcp_tool_change_approve,
        name="mcp_tool_change_approve",
    ),
]
