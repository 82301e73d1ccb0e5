"""Where the audit hook is registered: once, when Django has loaded every app."""

from django.apps import AppConfig


class McpAuditConfig(AppConfig):
    name = "mcp_audit"
    verbose_name = "MCP audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Before the first request builds the endpoint (zemcp.django.view in urls.py):
        # hooks are registered before the server is served.
        from mysite.mcp import server

        from mcp_audit.models import ToolCall

        server.on_audit(ToolCall.store)
