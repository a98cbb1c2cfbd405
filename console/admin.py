from django.contrib import admin

from console.models import (
    Agent,
    AgentKeyEvent,
    Invitation,
    InvitationEvent,
    Membership,
    MembershipEvent,
    PersonalAccessToken,
    Team,
    Tenant,
)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["tenant", "user", "role"]
    list_filter = ["tenant", "role"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "email"]
    filter_horizontal = ["members", "maintainers"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "role", "key_lookup", "last_used_at", "previous_key_expires_at", "revoked_at"]
    list_filter = ["tenant", "role"]
    # Keys change only through console.services (rotate_agent_key, cut_off_old_key), which audit it.
    readonly_fields = [
        "key_lookup",
        "key_hash",
        "key_created_at",
        "last_used_at",
        "previous_key_lookup",
        "previous_key_hash",
        "previous_key_created_at",
        "previous_key_expires_at",
        "previous_key_last_used_at",
    ]


@admin.register(AgentKeyEvent)
class AgentKeyEventAdmin(admin.ModelAdmin):
    list_display = ["tenant", "agent", "action", "actor_label", "created_at"]
    list_filter = ["tenant", "action"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PersonalAccessToken)
class PersonalAccessTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "key_lookup", "scopes", "created_at", "expires_at", "revoked_at"]
    readonly_fields = ["key_lookup", "key_hash", "last_used_at"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = [
        "tenant",
        "email",
        "username",
        "roles",
        "created_at",
        "expires_at",
        "accepted_at",
        "declined_at",
        "revoked_at",
    ]
    list_filter = ["tenant"]
    readonly_fields = ["token_hash"]


@admin.register(InvitationEvent)
class InvitationEventAdmin(admin.ModelAdmin):
    list_display = ["tenant", "invitation", "action", "actor_label", "created_at"]
    list_filter = ["tenant", "action"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MembershipEvent)
class MembershipEventAdmin(admin.ModelAdmin):
    """Read-only: the console's membership and team logs. Changes made here in the Django admin bypass it."""

    list_display = ["tenant", "team", "member_label", "action", "actor_label", "created_at"]
    list_filter = ["action"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
