from django.urls import path

from approvals import views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("count/", views.pending_count, name="count"),
    path("history/", views.history, name="history"),
    path("<int:approval_id>/", views.detail, name="detail"),
    path("<int:approval_id>/card/", views.card, name="card"),
    path("<int:approval_id>/decide/", views.decide, name="decide"),
    path("<int:approval_id>/preview-edit/", views.preview_edit, name="preview_edit"),
]
