"""The app's configuration, as ``startapp`` makes it."""

from django.apps import AppConfig


class McpAuditConfig(AppConfig):
    name = "mcp_audit"
    verbose_name = "MCP audit"
    default_auto_field = "django.db.models.BigAutoField"
