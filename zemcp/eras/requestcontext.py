"""What a transport knows of one message beyond its JSON-RPC content, and what the eras answer.

Each transport (Streamable HTTP in :mod:`zemcp.http`, stdio in :mod:`zemcp.cli.stdio`) builds one
:class:`RequestContext` per message it hands to an era: who acts, whose shares the message counts
in, the session it belongs to, the headers the 2026-07-28 era checks against the body, the trace
context, and how the transport writes a reply. Nothing below the transports reads a WSGI environ:
what they need of it is here. The layers of :mod:`zemcp.pipeline` fill in the rest (the
telemetry operation, what the principal may see) and hear when a running call ends.

An era answers a message with an outcome: a JSON-RPC response (a dict), a :class:`Running` call
whose output streams to its sink, or (the handshake era) what became of a POSTed answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from zemcp.auth.access import OPEN, Access
from zemcp.observe.telemetry import NULL_OPERATION, Operation

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal
    from zemcp.protocol.jsonrpc import Message, RequestId
    from zemcp.replies.direct import DirectSink
    from zemcp.replies.sinks import ReplySink
    from zemcp.state.session import Session
    from zemcp.state.streamlogs import StreamLogs
    from zemcp.state.waitingcalls import Delivery

#: ``open_sink(streams, request_id)``: the sink of a request whose handler may talk to the client.
SinkFactory = Callable[["StreamLogs | None", "RequestId | None"], "ReplySink | DirectSink"]
#: ``TCP`` for HTTP, ``PIPE`` for stdio (a span's ``network.transport``, a session's transport).
TCP = "tcp"
PIPE = "pipe"


class RequestContext:
    """One message's context, built by its transport.

    Args:
        transport: :data:`TCP` or :data:`PIPE`.
        open_sink: ``open_sink(streams, request_id)`` returns the sink a running handler writes
            to: under gunicorn a :class:`zemcp.replies.direct.DirectSink` (the handler runs on
            the request's thread), else a :class:`zemcp.replies.sinks.ReplySink` (a resumable one
            when ``streams``, a session's, is given and the transport can resume streams).
        principal: who the request's access token names; None without authorization.
        user: the user the transport's site authenticated (a framework's request user),
            whom ``permission=`` rules are asked about; None: the principal is asked about.
        request: the framework's request object (Django's ``HttpRequest``), the handler's
            ``ctx.request``; None without a framework view.
        client: the key of its client (:func:`zemcp.state.shares.client_key`), whose fair
            shares and rate limits it counts in; None for a transport with one client (stdio).
        session: the handshake-era session the message belongs to (the live session its
            ``Mcp-Session-Id`` names, or a stdio connection's); ``initialize`` sets it to the
            session it creates.
        headers: the HTTP request's headers (``.get(name)``), which 2026-07-28 requests must
            mirror (basic/transports/streamable-http); None for a transport without headers.
        trace: the W3C trace context the transport carried (``traceparent``, ``tracestate``,
            ``baggage``), the parent of the message's span when ``params._meta`` has none.
        can_wait: False when a handler's question could never get its answer (a WSGI server
            that serves one request at a time per process).

    Attributes:
        operation: the telemetry operation of the message (:mod:`zemcp.pipeline.telemetry`),
            :data:`zemcp.observe.telemetry.NULL_OPERATION` when nothing is recorded.
        access: what the principal may see and use (:mod:`zemcp.pipeline.authorization`).
        ending: the exception that ended a running call's handler instead of a return (an
            outcome of asking the client, an abort, or what the handler raised), once the call
            ended (:meth:`finish`); None otherwise. The audit layer tells the outcome from it.
    """

    __slots__ = (
        "_finishers",
        "access",
        "can_wait",
        "client",
        "ending",
        "headers",
        "open_sink",
        "operation",
        "principal",
        "request",
        "session",
        "trace",
        "transport",
        "user",
    )

    def __init__(
        self,
        transport: str,
        open_sink: SinkFactory,
        *,
        principal: Principal | None = None,
        user: Any = None,
        request: Any = None,
        client: str | None = None,
        session: Session | None = None,
        headers: Any = None,
        trace: Mapping[str, str] | None = None,
        can_wait: bool = True,
    ):
        self.transport = transport
        self.open_sink = open_sink
        self.principal = principal
        self.user = user
        self.request = request
        self.client = client
        self.session = session
        self.headers = headers
        self.trace = trace
        self.can_wait = can_wait
        self.operation: Operation = NULL_OPERATION
        self.access: Access = OPEN
        self.ending: BaseException | None = None
        # Made by the first on_finish: most messages have no layer that waits for an end.
        self._finishers: list[Callable[[dict[str, Any] | None], object]] | None = None

    def on_finish(self, callback: Callable[[dict[str, Any] | None], object]) -> None:
        """Run ``callback(response)`` when the message's running call ends (see :meth:`finish`).

        A layer registers it before the era serves the message; it runs only when the era
        answers with a :class:`Running` call (an answer at once is the layer's own to see).
        """
        if self._finishers is None:
            self._finishers = []
        self._finishers.append(callback)

    def finish(self, response: dict[str, Any] | None, ending: BaseException | None = None) -> None:
        """The running call ended with ``response`` (None: cancelled, nothing is sent): run the
        callbacks, innermost layer first, before the response is handed to the client.

        Args:
            response: the JSON-RPC response, or None.
            ending: the exception that ended the handler instead of a return, if one did
                (the exchange's :attr:`zemcp.core.exchange.Abortable.ending`); kept as :attr:`ending`.
        """
        self.ending = ending
        for callback in reversed(self._finishers or ()):
            callback(response)


class Running:
    """A call an era set up whose handler is to run: the job and the sink its output goes to.

    :mod:`zemcp.pipeline.admission` admits it to the call budget and starts ``job`` (on the
    request's thread for a :class:`zemcp.replies.direct.DirectSink`, else on the handler pool);
    the job answers its request whatever happens and calls :meth:`RequestContext.finish` as it
    ends.

    Args:
        job: runs the handler and finishes the sink.
        sink: where its output goes; the transport reads or writes it.
        withdraw: undoes what the era set up for the call, when it is refused before its job
            runs (the call budget is taken).
    """

    __slots__ = ("job", "sink", "withdraw")

    def __init__(
        self, job: Callable[[], None], sink: ReplySink | DirectSink, withdraw: Callable[[], object] = lambda: None
    ):
        self.job = job
        self.sink = sink
        self.withdraw = withdraw


#: What serving a message gives: a JSON-RPC response; a :class:`Running` call; the sink of a
#: stream that starts with its acknowledgement (``subscriptions/listen``); what became of a
#: POSTed answer (:class:`zemcp.state.waitingcalls.Delivery`); None for a notification.
Outcome: TypeAlias = "dict[str, Any] | Running | ReplySink | Delivery | None"
#: ``serve(message, context) -> Outcome``: an era's entry point, or a layer of :mod:`zemcp.pipeline` around it.
Serve: TypeAlias = "Callable[[Message, RequestContext], Outcome]"
