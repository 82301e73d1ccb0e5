"""The telemetry of a server's requests: each message an operation, the live figures read off the server.

:func:`begin` opens the :class:`zemcp.observe.telemetry.Operation` of a message a client
sent, naming what it targets (a tool, a prompt, a resource); :func:`figures` reads what
the gauges of :data:`zemcp.observe.instruments.GAUGES` report.
"""

from __future__ import annotations

from typing import Any

from zemcp.observe.telemetry import NULL_OPERATION, Operation
from zemcp.protocol import jsonrpc
from zemcp.state.session import Session, fingerprint
from zemcp.state.unavailable import StateUnavailable

#: The MCP methods zemcp knows beside :meth:`Server.methods` (the eras' own, notifications),
#: which name themselves in metrics; any other method is ``_OTHER`` there.
KNOWN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "server/discover",
        "subscriptions/listen",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/roots/list_changed",
    }
)


def begin(
    server: Any,
    message: jsonrpc.Request | jsonrpc.Notification,
    environ: dict[str, Any],
    version: str | None,
    session: Session | None = None,
) -> Operation:
    """Open the telemetry operation of a message a client sent (:meth:`zemcp.observe.telemetry.Telemetry.begin`).

    Args:
        server: the :class:`zemcp.core.server.Server` (its telemetry and what it offers).
        message: the request or notification.
        environ: the WSGI environ, or the stand-in of a transport without HTTP (stdio).
        version: the message's protocol version.
        session: the handshake-era session it belongs to.
    """
    telemetry = server.telemetry
    if not telemetry.active:
        return NULL_OPERATION
    method, params = message.method, message.params
    target = None
    known_target = True
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
        target = name if isinstance(name, str) else None
        registry = server.tools if method == "tools/call" else server.prompts
        known_target = target is not None and registry.get(target) is not None
    elif method.startswith("resources/"):
        uri = params.get("uri")
        target = uri if isinstance(uri, str) else None
    label = fingerprint(session.id) if session is not None else None
    request_id = message.id if isinstance(message, jsonrpc.Request) else None
    operation: Operation = telemetry.begin(
        method,
        request_id,
        environ,
        target=target,
        known_method=method in KNOWN_METHODS or method in server.methods(),
        known_target=known_target,
        version=version,
        session=label,
        meta=params.get("_meta"),
    )
    return operation


def figures(server: Any) -> dict[str, Any] | None:
    """The live figures of ``server`` (a :class:`zemcp.core.server.Server`) that
    :data:`zemcp.observe.instruments.GAUGES` names; None once the server is gone (None)."""
    if server is None:
        return None
    try:
        sessions = len(server.sessions)
    except StateUnavailable:
        # Shared sessions out of reach (Redis down): a scrape still reports everything else.
        sessions = 0
    return {
        "zemcp.calls.running": server.admission.running,
        "zemcp.calls.budget": server.settings.call_budget,
        "zemcp.elicitations.pending": server.pending.count(),
        "zemcp.streams.open": {
            "standalone": server.admission.standalone,
            "listen": server.subscriptions.count(),
            "resuming": server.admission.resuming,
        },
        "zemcp.sessions.live": sessions,
    }
