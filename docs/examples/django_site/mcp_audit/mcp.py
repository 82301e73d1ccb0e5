"""Where the audit hook is registered: ``zemcp.django`` imports every installed app's ``mcp.py``
once Django is ready, before the first request builds the endpoint (hooks are registered
before the server is served)."""

from mcp_audit.models import ToolCall
from zemcp.django import server

server.on_audit(ToolCall.store)
