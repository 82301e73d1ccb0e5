"""The telemetry layer: each message a client sends becomes an operation (a span, a duration, a record).

Around the serving of a message, this layer opens its :class:`zemcp.observe.telemetry.Operation`
(naming what it targets: a tool, a prompt, a resource), leaves it on the request's context for
the era and the handler (:attr:`zemcp.eras.requestcontext.RequestContext.operation`), and ends
it with the outcome: an answer at once, a refusal (named by its JSON-RPC code or its class), or,
for a running call, the response its job ends with. A ``subscriptions/listen`` operation is the
opening of the stream: it ends with the acknowledgement. The answers a client POSTs to a
server's questions are parts of the operation that asked, not operations of their own; a
notification outside a session (the 2026-07-28 era defines none from the client) is none either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zemcp.eras.requestcontext import Running
from zemcp.observe.telemetry import NULL_OPERATION, Operation, failure_type
from zemcp.protocol import jsonrpc
from zemcp.protocol.envelope import version_of
from zemcp.state.session import fingerprint

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve

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


class Telemetry:
    """Opens and ends the operation of each message of one server (when its telemetry records anything).

    Args:
        server: the :class:`zemcp.core.server.Server` (its telemetry, and what it offers).
        next: serves the message.
    """

    def __init__(self, server: Server, next: Serve):
        self._server = server
        self._next = next

    @staticmethod
    def applies(server: Server) -> bool:
        """Whether the server's telemetry records anything (spans, metrics or request records)."""
        return bool(server.telemetry.active)

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message`` inside its operation.

        Raises:
            whatever serving it raised, once the operation ended with it.
        """
        if isinstance(message, jsonrpc.Response) or (
            isinstance(message, jsonrpc.Notification) and context.session is None
        ):
            # An answer is part of the operation that asked; a notification outside a session
            # (2026-07-28 defines none from the client) acts on nothing and is no operation.
            return self._next(message, context)
        operation = begin(self._server, message, context)
        context.operation = operation
        context.on_finish(lambda response: operation.finish(response, None if response is not None else "cancelled"))
        try:
            outcome = self._next(message, context)
        except BaseException as exc:
            operation.finish(None, failure_type(exc))
            raise
        if isinstance(outcome, dict):
            operation.finish(outcome)
        elif not isinstance(outcome, Running):
            operation.finish(None)  # a notification, or the acknowledged opening of a listen stream
        return outcome


def begin(server: Any, message: jsonrpc.Request | jsonrpc.Notification, context: RequestContext) -> Operation:
    """Open the operation of a message a client sent (:meth:`zemcp.observe.telemetry.Telemetry.begin`).

    Args:
        server: the :class:`zemcp.core.server.Server` (its telemetry and what it offers).
        message: the request or notification.
        context: its transport, session (whose version and fingerprint the operation names) and trace context.
    Returns:
        the operation; :data:`zemcp.observe.telemetry.NULL_OPERATION` when nothing is recorded.
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
    session = context.session
    operation: Operation = telemetry.begin(
        method,
        message.id if isinstance(message, jsonrpc.Request) else None,
        context.transport,
        target=target,
        known_method=method in KNOWN_METHODS or method in server.methods(),
        known_target=known_target,
        version=session.protocol_version if session is not None else version_of(message),
        session=fingerprint(session.id) if session is not None else None,
        meta=params.get("_meta"),
        trace=context.trace,
    )
    return operation
