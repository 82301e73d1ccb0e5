"""zemcp: synchronous MCP servers for WSGI.

Tools are plain blocking functions. The server speaks MCP's Streamable HTTP transport
(protocol versions 2024-11-05 to 2025-11-25) under gunicorn's gthread workers or mounted in
any WSGI stack, and a tool may ask the user for missing information in the middle of a call
with ``ctx.elicit(...)``.
"""

__version__ = "0.1.0"

from zemcp.config import Settings
from zemcp.elicitation import (
    ClientDisconnected,
    ElicitAborted,
    ElicitCancelled,
    ElicitDeclined,
    ElicitError,
    ElicitMalformed,
    ElicitSchemaInvalid,
    ElicitTimeout,
    ElicitTooMany,
    ElicitUnsupported,
    RequestCancelled,
    SessionEnded,
)
from zemcp.server import Server
from zemcp.context import (
    CapabilityMissing,
    ClientErrorResponse,
    ClientRequestError,
    ClientTimeout,
    Context,
    URLElicitationRequired,
)
from zemcp.tools import ToolError
from zemcp.transport import McpApp

__all__ = [
    "__version__",
    "Settings",
    "Server",
    "Context",
    "URLElicitationRequired",
    "ClientRequestError",
    "CapabilityMissing",
    "ClientErrorResponse",
    "ClientTimeout",
    "ToolError",
    "McpApp",
    "ElicitError",
    "ElicitDeclined",
    "ElicitCancelled",
    "ElicitMalformed",
    "ElicitUnsupported",
    "ElicitTooMany",
    "ElicitSchemaInvalid",
    "ElicitTimeout",
    "ElicitAborted",
    "RequestCancelled",
    "SessionEnded",
    "ClientDisconnected",
]
