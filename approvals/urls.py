from django.urls import path

from approvals import decision_views, notification_views, views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("count/", views.pending_count, name="count"),
    path("history/", views.history, name="history"),
    path("<id:approval_id>/", views.detail, name="detail"),
    path("<id:approval_id>/card/", views.card, name="card"),
    path("<id:approval_id>/decide/", views.decide, name="decide"),
    path("<id:approval_id>/cancel/", views.cancel, name="cancel"),
    path("<id:approval_id>/preview-edit/", views.preview_edit, name="preview_edit"),
    path("notifications/", notification_views.notification_preferences, name="notification_preferences"),
    path("notifications/<slug:tenant_slug>/mine/", notification_views.save_preference, name="save_preference"),
    path("t/<slug:tenant_slug>/decisions/", decision_views.decision_history, name="decision_history"),
    path("t/<slug:tenant_slug>/decisions/export/", decision_views.decision_export, name="decision_export"),
    path(
        "t/<slug:tenant_slug>/notifications/",
        notification_views.notification_settings,
        name="notification_settings",
    ),
]
