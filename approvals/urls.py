from django.urls import path

from approvals import decision_views, link_views, notification_views, routing_views, views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("count/", views.pending_count, name="count"),
    path("history/", views.history, name="history"),
    path("bulk/", views.bulk_decide, name="bulk_decide"),
    path("layout/", views.inbox_layout, name="inbox_layout"),
    path("<id:approval_id>/", views.detail, name="detail"),
    path("<id:approval_id>/card/", views.card, name="card"),
    path("<id:approval_id>/decide/", views.decide, name="decide"),
    path("<id:approval_id>/cancel/", views.cancel, name="cancel"),
    path("<id:approval_id>/ask-agent/", views.ask_agent, name="ask_agent"),
    path("<id:approval_id>/preview-edit/", views.preview_edit, name="preview_edit"),
    path("notifications/", notification_views.notification_preferences, name="notification_preferences"),
    path("notifications/<slug:tenant_slug>/mine/", notification_views.save_preference, name="save_preference"),
    path("t/<slug:tenant_slug>/decisions/", decision_views.decision_history, name="decision_history"),
    path("t/<slug:tenant_slug>/decisions/export/", decision_views.decision_export, name="decision_export"),
    path("notifications/<slug:tenant_slug>/slack/unlink/", link_views.slack_unlink, name="slack_unlink"),
    path("email/<str:link>/", link_views.email_decision, name="email_decision"),
    path("slack/link/<str:slack_token>/", link_views.slack_link, name="slack_link"),
    path(
        "t/<slug:tenant_slug>/notifications/",
        notification_views.notification_settings,
        name="notification_settings",
    ),
    path("t/<slug:tenant_slug>/routing/", routing_views.routing, name="routing"),
    path("t/<slug:tenant_slug>/routing/groups/", routing_views.group_create, name="group_create"),
    path("t/<slug:tenant_slug>/routing/routes/", routing_views.route_create, name="route_create"),
    path("routing/groups/<id:group_id>/members/", routing_views.group_members, name="group_members"),
    path("routing/groups/<id:group_id>/delete/", routing_views.group_delete, name="group_delete"),
    path("routing/routes/<id:route_id>/", routing_views.route_update, name="route_update"),
    path("routing/routes/<id:route_id>/delete/", routing_views.route_delete, name="route_delete"),
    path("routing/routes/<id:route_id>/move/", routing_views.route_move, name="route_move"),
]
