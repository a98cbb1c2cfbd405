"""The console's own pages (namespace "console"); the project's root URLconf is airlock.urls."""

from django.urls import path

from console import incident_views, views

app_name = "console"

urlpatterns = [
    path("login/", views.AirlockLoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("tenant/switch/", views.switch_tenant, name="switch_tenant"),
    path("t/<slug:tenant_slug>/members/", views.member_list, name="member_list"),
    path("t/<slug:tenant_slug>/invitations/", views.invitation_create, name="invitation_create"),
    path(
        "t/<slug:tenant_slug>/invitations/<id:invitation_id>/revoke/",
        views.invitation_revoke,
        name="invitation_revoke",
    ),
    path("invitations/<id:invitation_id>/accept/", views.invitation_accept, name="invitation_accept"),
    path("invitations/<id:invitation_id>/decline/", views.invitation_decline, name="invitation_decline"),
    path("invitations/open/<str:token>/", views.invitation_open, name="invitation_open"),
    path("t/<slug:tenant_slug>/members/<id:user_id>/", views.member_edit, name="member_edit"),
    path("t/<slug:tenant_slug>/members/<id:user_id>/remove/", views.member_remove, name="member_remove"),
    path("t/<slug:tenant_slug>/agents/", views.agent_list, name="agent_list"),
    path("t/<slug:tenant_slug>/agents/new/", views.agent_create, name="agent_create"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/revoke/", views.agent_revoke, name="agent_revoke"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/keys/", views.agent_keys, name="agent_keys"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/keys/rotate/", views.agent_rotate, name="agent_rotate"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/keys/cut-off/", views.agent_cut_off, name="agent_cut_off"),
    path("tenants/", views.tenant_list, name="tenant_list"),
    path("teams/", views.team_list, name="team_list"),
    path("teams/<slug:team_slug>/", views.team_detail, name="team_detail"),
    path("teams/<slug:team_slug>/members/", views.team_member_add, name="team_member_add"),
    path("teams/<slug:team_slug>/members/<id:user_id>/remove/", views.team_member_remove, name="team_member_remove"),
    path("teams/<slug:team_slug>/members/<id:user_id>/maintainer/", views.team_maintainer, name="team_maintainer"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/suspend/", incident_views.agent_suspend, name="agent_suspend"),
    path("t/<slug:tenant_slug>/agents/<id:agent_id>/resume/", incident_views.agent_resume, name="agent_resume"),
    path("t/<slug:tenant_slug>/incident/", incident_views.tenant_controls, name="tenant_controls"),
    path("t/<slug:tenant_slug>/incident/freeze/", incident_views.tenant_freeze, name="tenant_freeze"),
    path("t/<slug:tenant_slug>/incident/unfreeze/", incident_views.tenant_unfreeze, name="tenant_unfreeze"),
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<id:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]

console_patterns = urlpatterns
