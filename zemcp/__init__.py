"""zemcp: synchronous MCP servers for WSGI.

Tools are plain blocking functions. The server speaks MCP's Streamable HTTP transport under
gunicorn's gthread workers or mounted in any WSGI stack, in both protocol eras on one
endpoint: the stateless 2026-07-28 revision and the handshake versions 2024-11-05 to
2025-11-25. A tool may ask the user for missing information in the middle of a call with
``ctx.elicit(...)``, with the same code in both eras.
"""

from zemcp.config import Settings
from zemcp.core.audit import AuditRecord
from zemcp.core.context import Context
from zemcp.core.errors import (
    CannotWait,
    CapabilityMissing,
    ClientErrorResponse,
    ClientRequestError,
    ClientTimeout,
    URLElicitationRequired,
)
from zemcp.core.questions import Ask, Elicit, ElicitURL, ListRoots, Sample
from zemcp.core.resources import ResourceNotFound
from zemcp.core.server import Server
from zemcp.core.tools import ToolError
from zemcp.http.transport import McpApp
from zemcp.protocol.apps import AppCsp
from zemcp.protocol.elicitation import (
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
from zemcp.protocol.icons import Icon
from zemcp.protocol.jsonrpc import ProtocolError
from zemcp.protocol.param_headers import McpHeader
from zemcp.version import __version__

__all__ = [
    "__version__",
    "Settings",
    "Server",
    "Context",
    "AuditRecord",
    "Ask",
    "Elicit",
    "ElicitURL",
    "Sample",
    "ListRoots",
    "McpHeader",
    "Icon",
    "AppCsp",
    "URLElicitationRequired",
    "ClientRequestError",
    "CapabilityMissing",
    "ClientErrorResponse",
    "ClientTimeout",
    "CannotWait",
    "ToolError",
    "ProtocolError",
    "ResourceNotFound",
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
