"""``subscriptions/listen``: the 2026-07-28 stream of change notifications (basic/patterns/subscriptions)."""

from __future__ import annotations

from typing import Any

from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from zemcp.replies.sinks import ReplySink
from zemcp.state import shares


def open_listen(server: Any, request: jsonrpc.Request, environ: dict[str, Any]) -> ReplySink:
    """Open a listen stream for ``request`` of ``server`` (a :class:`zemcp.core.server.Server`):
    a stream that starts with the acknowledgement.

    Raises:
        ProtocolError: -32601 when listen streams are off, -32602 for bad ``notifications``.
        ListenLimitReached, Busy, ShareTaken: no room for another stream.
    """
    if server.subscriptions.max_streams == 0:
        # Turned off: server/discover then declares nothing a listen stream would carry.
        raise ProtocolError(
            METHOD_NOT_FOUND,
            "Method not found: subscriptions/listen is turned off on this server (ZEMCP_MAX_LISTEN_STREAMS=0)",
        )
    capabilities = server.capabilities(versions.STATELESS)
    supported = {
        "toolsListChanged": capabilities.get("tools", {}).get("listChanged", False),
        "promptsListChanged": capabilities.get("prompts", {}).get("listChanged", False),
        "resourcesListChanged": capabilities.get("resources", {}).get("listChanged", False),
        "resourceSubscriptions": capabilities.get("resources", {}).get("subscribe", False),
    }
    try:
        acknowledged, kinds, uris = server.subscriptions.honoured(request.params.get("notifications"), supported)
    except ValueError as exc:
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {exc}") from None
    # A listen stream holds a thread for as long as it is open: it counts in the call budget.
    sink = ReplySink()
    server.admission.open_stream(
        lambda: server.subscriptions.open(request.id, acknowledged, kinds, uris, sink),
        environ.get(shares.ENVIRON_KEY),
    )
    return sink
