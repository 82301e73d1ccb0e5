"""The stored calls in the admin: listed, filtered and searched, never edited."""

from django.contrib import admin

from mcp_audit.models import ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ("started", "user", "method", "tool", "outcome", "reason", "duration", "protocol_version", "task_id")
    list_filter = ("outcome", "method", "protocol_version")
    search_fields = ("user", "tool", "task_id")
    date_hierarchy = "started"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
