"""The JSON of a reply: a response whose result JSON cannot carry becomes a -32603 error.

The one encoder of the messages that go back to the client, used by every reply sink and
event-stream body (MCP basic/transports; JSON-RPC 2.0 error -32603, Internal error).
"""

from __future__ import annotations

import logging
from typing import Any

from zemcp.protocol import jsonrpc

log = logging.getLogger("zemcp.transport")


def encode(message: dict[str, Any]) -> bytes:
    """Encode a response, whose result comes from application code and may hold values JSON
    cannot carry: such a response becomes a -32603 error for the same id.

    Server-to-client messages need no such care: the context checks them before they are
    queued, so the handler that built them gets the error.
    """
    try:
        return jsonrpc.encode(message)
    except (TypeError, ValueError) as exc:
        log.error("cannot encode a response as JSON: %s", exc)
        return jsonrpc.encode(
            jsonrpc.error(
                message.get("id"),
                jsonrpc.INTERNAL_ERROR,
                f"Internal error: the result is not valid JSON ({exc}); fix the handler's return value",
            )
        )
