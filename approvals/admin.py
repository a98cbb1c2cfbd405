from django.contrib import admin

from approvals.models import ApprovalEvent, ApprovalNotice, ApprovalRequest, WebhookDelivery


class ApprovalEventInline(admin.TabularInline):
    model = ApprovalEvent
    extra = 0
    can_delete = False
    readonly_fields = ["created_at", "actor_label", "action", "from_status", "to_status", "detail"]
    fields = readonly_fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    """Read-only: decisions go through the inbox or the API, so the rules and the audit log hold."""

    list_display = ["id", "tenant", "skill_name", "status", "created_at", "decided_by_label"]
    list_filter = ["status", "tenant"]
    search_fields = ["skill_name", "decided_by_label"]
    inlines = [ApprovalEventInline]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "approval", "status", "attempts", "last_status_code", "created_at", "delivered_at"]
    list_filter = ["status"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ApprovalNotice)
class ApprovalNoticeAdmin(admin.ModelAdmin):
    """Read-only: the e-mails of approver notifications, as the tenant admins' page lists them."""

    list_display = ["id", "tenant", "approval", "user", "mode", "status", "attempts", "created_at", "sent_at"]
    list_filter = ["status", "mode", "tenant"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False
