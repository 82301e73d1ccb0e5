"""The handshake era over Streamable HTTP: ``initialize``, sessions and pushed server requests.

MCP 2024-11-05 to 2025-11-25 (basic/lifecycle, basic/transports "Session Management"):
``initialize`` negotiates a version and creates a session named by ``Mcp-Session-Id`` on
every later request; ``ping``, ``logging/setLevel`` and resource subscriptions act on the
session; a handler's questions for the client (elicitation, sampling, roots) go out as
JSON-RPC requests on its request's SSE stream and its thread waits for the answers, which
arrive as POSTed JSON-RPC responses (:class:`zemcp.eras.handshake.call.Call`, the correlation table);
``notifications/cancelled`` and DELETE end waits. Sessions live in the process that created
them. :class:`zemcp.http.transport.McpApp` hands this module every request that is not in the
2026-07-28 envelope.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from zemcp import logsafe
from zemcp.auth.principal import InsufficientScope, Principal
from zemcp.core import observed
from zemcp.core.admission import Busy
from zemcp.core.server import Server, Work
from zemcp.eras.handshake import tasks
from zemcp.eras.handshake.answers import delivery_response
from zemcp.eras.handshake.call import Call
from zemcp.eras.handshake.streams import Streams
from zemcp.observe.telemetry import REFUSAL, Operation, failure_type
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.capabilities import LOG_LEVELS, check_size
from zemcp.protocol.elicitation import ClientDisconnected, RequestCancelled
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from zemcp.replies.direct import DirectSink
from zemcp.replies.responses import (
    WSGIResponse,
    challenge_response,
    empty_response,
    error_response,
    json_response,
    new_sink,
    reply,
)
from zemcp.replies.sinks import ReplySink
from zemcp.state import shares
from zemcp.state.session import UNKNOWN_SESSION, Session, fingerprint
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.state.shares import ShareTaken
from zemcp.state.tasks import TaskLimitReached

log = logging.getLogger("zemcp.handshake")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
# The WSGI environ keys of the two headers (PEP 3333: HTTP_ and the name in capitals, - as _).
SESSION_KEY = "HTTP_MCP_SESSION_ID"
VERSION_KEY = "HTTP_MCP_PROTOCOL_VERSION"
#: [seconds] ``Retry-After`` sent with 429 when the session cap is reached.
RETRY_AFTER = 30


class HandshakeEra:
    """Serves handshake-era requests of one :class:`Server`.

    Args:
        server: the MCP server core.
    """

    def __init__(self, server: Server):
        self.server = server
        self.settings = server.settings
        #: Serves the GETs that read a session's streams.
        self.streams = Streams(server)
        self._session_methods: dict[str, Callable[[Session, jsonrpc.Request, Principal | None], dict[str, Any]]] = {
            "ping": lambda session, request, principal: {},
            "logging/setLevel": lambda session, request, principal: self._set_log_level(session, request),
            "resources/subscribe": lambda s, r, p: self.server.subscribe(s, r.params, p),
            "resources/unsubscribe": lambda s, r, p: self.server.resources.unsubscribe(s, r.params),
        }

    def post(self, request: Request, message: jsonrpc.Message, principal: Principal | None = None) -> WSGIResponse:
        """Answer one POSTed message (already parsed) of the handshake era.

        With authorization on, ``principal`` is who the request's token names: a session
        belongs to the principal that initialized it, and any other gets 404 for it, as for
        a session that does not exist (answers to its elicitations included).

        Returns:
            the response; a POSTed answer (a JSON-RPC response) is answered as
            :func:`zemcp.eras.handshake.answers.delivery_response` says (202, 400 or 503), or 404
            for an unknown session, saying the answer was not delivered.
        """
        # Only a request's id is echoed: a response's id is the server's own request id.
        request_id = message.id if isinstance(message, jsonrpc.Request) else None
        environ = request.environ
        session_id = environ.get(SESSION_KEY)
        if session_id is not None and "," in session_id:
            # Repeated headers arrive joined with commas; a session id never contains one.
            return error_response(
                400,
                INVALID_REQUEST,
                "Bad Request: send the Mcp-Session-Id header once, with one session id",
                id=request_id,
            )
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            return self._initialize(message, session_id, principal, request.environ)
        try:
            check_protocol_header(environ.get(VERSION_KEY))
            session = self._owned(self.server.sessions.get(session_id), principal)
        except ProtocolError as exc:
            return error_response(400, exc.code, exc.message, id=request_id)
        except SessionRequired as exc:
            return error_response(400, INVALID_REQUEST, str(exc), id=request_id)
        except SessionNotFound as exc:
            # The handler that asked keeps waiting for this answer wherever its session lives:
            # the client must learn that the answer went nowhere, not only that the session did.
            text = f"This answer was not delivered: {exc}" if isinstance(message, jsonrpc.Response) else str(exc)
            return error_response(404, INVALID_REQUEST, text, id=request_id)
        if isinstance(message, jsonrpc.Response):
            return delivery_response(self.server.pending.resolve(session.id, message), message)
        if isinstance(message, jsonrpc.Notification):
            self.notification(session, message, request.environ)
            return empty_response(202)
        try:
            outcome = self.handle(session, message, request.environ, principal)
        except SessionNotFound as exc:
            return error_response(404, INVALID_REQUEST, str(exc), id=request_id)
        except InsufficientScope as exc:
            assert self.server.auth is not None  # only authorization raises it
            return challenge_response(self.server.auth.challenge_for(exc), request_id)
        except (Busy, ShareTaken, TaskLimitReached) as exc:
            request.environ[REFUSAL] = exc.reason
            return error_response(
                exc.status, INTERNAL_ERROR, str(exc), id=request_id, headers={"Retry-After": str(exc.retry_after)}
            )
        if isinstance(outcome, dict):
            return json_response(200, outcome)
        return reply(outcome, request.environ, self.settings.keepalive_interval)

    def get(self, request: Request, principal: Principal | None = None) -> Response:
        """GET with ``Mcp-Session-Id``: resume a stream of the session (``Last-Event-ID``), or
        open the session's standalone stream (MCP basic/transports, "Listening for Messages
        from the Server" and "Resumability and Redelivery").

        Resuming replays the events after the id, then goes on with the live ones (a request's
        response included) on this connection; the connection that read the stream before
        stops. The standalone stream carries list changes and resource updates
        (the server's :class:`zemcp.state.fanout.FanOut`); a session has one.

        Returns:
            ``text/event-stream``; 400 for a bad header or id, 404 for an unknown session or
            an event id no stream of the session has, 405 when standalone streams are off,
            406 without ``text/event-stream`` in ``Accept``, 409 when the standalone stream is
            read already, 410 when the events after the id were dropped, 429 or 503 when
            there is no room for another stream.
        """
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None and "," in session_id:
            return error_response(
                400, INVALID_REQUEST, "Bad Request: send the Mcp-Session-Id header once, with one session id"
            )
        try:
            check_protocol_header(request.headers.get(VERSION_HEADER))
            session = self._owned(self.server.sessions.get(session_id), principal)
        except ProtocolError as exc:
            return error_response(400, exc.code, exc.message)
        except (SessionNotFound, SessionRequired) as exc:
            return error_response(404, INVALID_REQUEST, str(exc))
        if not request.accept_mimetypes["text/event-stream"]:
            return error_response(
                406,
                INVALID_REQUEST,
                "Not Acceptable: a GET reads an SSE stream; the Accept header must list text/event-stream",
            )
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:
            return self.streams.resume(request, session, last_event_id)
        return self.streams.standalone(request, session)

    def delete(self, request: Request, principal: Principal | None = None) -> Response:
        """End the session named by the request (DELETE): 204, or 404 when it is not live
        (or, with authorization on, belongs to another principal)."""
        session_id = request.headers.get(SESSION_HEADER)
        try:
            check_protocol_header(request.headers.get(VERSION_HEADER))
            self._owned(self.server.sessions.get(session_id), principal)
        except ProtocolError as exc:
            return error_response(400, exc.code, exc.message)
        except (SessionNotFound, SessionRequired) as exc:
            return error_response(404, INVALID_REQUEST, str(exc))
        assert session_id is not None  # sessions.get refused a missing one
        if not self.server.end_session(session_id):
            return error_response(404, INVALID_REQUEST, "Session not found: it already ended or was never created here")
        return empty_response(204)

    # -- lifecycle ---------------------------------------------------------------------

    def _owned(self, session: Session, principal: Principal | None) -> Session:
        """``session``, if ``principal`` is the one it belongs to.

        Raises:
            SessionNotFound: it belongs to another principal (logged: a session id used with
                someone else's token is a hijack attempt or a leaked id).
        """
        key = principal.key if principal is not None else None
        if session.principal != key:
            log.warning(
                "refused session %s to %s: it belongs to another principal",
                fingerprint(session.id),
                logsafe.clip(principal.subject if principal is not None else "a request without a token"),
            )
            raise SessionNotFound(UNKNOWN_SESSION)
        return session

    def _initialized(self, session_id: str, principal: Principal | None) -> bool:
        """Whether ``session_id`` names a live session of ``principal``, which ``initialize`` may not start again.

        A live session of another principal counts as none: refusing it would tell that its
        id is live, which an unknown id does not.
        """
        try:
            session = self.server.sessions.get(session_id)
        except SessionNotFound:
            return False
        if session.principal != (principal.key if principal is not None else None):
            log.warning(
                "initialize named session %s of another principal; a new session is created", fingerprint(session.id)
            )
            return False
        return True

    def _initialize(
        self, request: jsonrpc.Request, session_id: str | None, principal: Principal | None, environ: dict[str, Any]
    ) -> Response:
        """``initialize`` over HTTP: a session and its ``Mcp-Session-Id`` header."""
        if session_id is not None and self._initialized(session_id, principal):
            return error_response(
                400,
                INVALID_REQUEST,
                "Bad Request: this session is already initialized; to start a "
                "new session, send initialize without the Mcp-Session-Id header",
                id=request.id,
            )
        try:
            session, result = self.open_session(request, principal, environ)
        except ProtocolError as exc:
            return error_response(400, exc.code, exc.message, id=request.id)
        except SessionLimitReached as exc:
            environ[REFUSAL] = "sessions"
            return error_response(
                429,
                INVALID_REQUEST,
                f"Too Many Requests: {exc}",
                id=request.id,
                headers={"Retry-After": str(RETRY_AFTER)},
            )
        return json_response(200, jsonrpc.result(request.id, result), headers={SESSION_HEADER: session.id})

    def open_session(
        self, request: jsonrpc.Request, principal: Principal | None = None, environ: dict[str, Any] | None = None
    ) -> tuple[Session, dict[str, Any]]:
        """``initialize``: negotiate the version and create a session (MCP basic/lifecycle), for any transport.

        ``environ`` is the WSGI environ of an HTTP request; None for stdio.

        Returns:
            the new session and the ``InitializeResult``.
        Raises:
            ProtocolError: -32602 for bad params (no string ``protocolVersion``, capabilities
                or clientInfo not objects or over ``max_client_info_bytes``).
            SessionLimitReached: the process holds ``max_sessions`` sessions.
        """
        operation = observed.begin(self.server, request, environ or {}, None)
        try:
            session, result = self._open_session(request, principal)
        except BaseException as exc:
            operation.finish(None, failure_type(exc))
            raise
        if environ is None:
            session.transport = "pipe"
        operation.negotiated(session.protocol_version, fingerprint(session.id))
        operation.finish({"result": result})
        return session, result

    def _open_session(self, request: jsonrpc.Request, principal: Principal | None) -> tuple[Session, dict[str, Any]]:
        params = request.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: initialize needs params.protocolVersion (a string)")
        capabilities = params.get("capabilities", {})
        client_info = params.get("clientInfo", {})
        if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: capabilities and clientInfo must be objects")
        try:
            # The session keeps both for its whole life: bound what one client can make it hold.
            check_size("params.capabilities", capabilities, self.settings.max_client_info_bytes)
            check_size("params.clientInfo", client_info, self.settings.max_client_info_bytes)
        except ValueError as exc:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {exc}") from None
        # initialize never negotiates a stateless version: those need no handshake.
        version = requested if requested in versions.HANDSHAKE else versions.LATEST
        session = self.server.sessions.create(
            version, client_info, capabilities, principal.key if principal is not None else None
        )
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.server.capabilities(version),
            "serverInfo": {"name": self.server.name, "version": self.server.version},
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        # Clipped reprs: client-chosen strings must not flood the log or forge log lines.
        label = fingerprint(session.id)
        log.info(
            "session %s initialized: client %s %s, protocol %s, elicitation %s",
            label,
            logsafe.clip(client_info.get("name")),
            logsafe.clip(client_info.get("version")),
            version,
            "yes" if session.client_supports_elicit() else "no",
            extra={"event": "session_initialized", "session": label},
        )
        return session, result

    # -- requests of a session -----------------------------------------------------------

    def handle(
        self, session: Session, request: jsonrpc.Request, environ: dict[str, Any], principal: Principal | None = None
    ) -> dict[str, Any] | ReplySink | DirectSink:
        """A request of a live session: a JSON-RPC response, or the sink of a running handler.

        ``environ`` is the WSGI environ, or ``{"wsgi.multithread": True}`` for a transport
        that reads the client's answers on another thread (stdio).

        Raises:
            SessionNotFound: the session ended while the request arrived.
            Busy: the call budget is taken.
            ShareTaken: the request's client holds its share of the call budget.
            TaskLimitReached: a task cannot be created (``max_tasks``, the client's share, a stop).
        """
        operation = observed.begin(self.server, request, environ, session.protocol_version, session)
        return operation.serve(lambda: self._answer(session, request, environ, principal, operation))

    def _answer(
        self,
        session: Session,
        request: jsonrpc.Request,
        environ: dict[str, Any],
        principal: Principal | None,
        operation: Operation,
    ) -> dict[str, Any] | ReplySink | DirectSink:
        try:
            method = self._session_methods.get(request.method)
            if method is not None:
                return jsonrpc.result(request.id, method(session, request, principal))
            if request.method in tasks.METHODS:
                return tasks.serve(self.server, session, request, environ, principal, operation)
            if request.method not in self.server.methods():
                return jsonrpc.error(request.id, METHOD_NOT_FOUND, f"Method not found: {request.method}")
            outcome = self.server.prepare(session, request, principal)
            if isinstance(outcome, Work):
                task = tasks.requested(self.server, session, request, outcome)
                if task is not None:
                    return tasks.create(self.server, session, request, outcome, task, environ)
                return self._start(session, request, outcome, environ, operation)
            return tasks.not_created(self.server, session, request, outcome) or jsonrpc.result(request.id, outcome)
        except ProtocolError as exc:
            return jsonrpc.error(request.id, exc.code, exc.message, exc.data)

    def _start(
        self, session: Session, request: jsonrpc.Request, work: Work, environ: dict[str, Any], operation: Operation
    ) -> ReplySink | DirectSink:
        """Start ``work`` as a call of ``session``; its sink tells JSON from stream.

        Under a WSGI server that is not multithreaded the call cannot wait for answers
        (``wsgi.multithread`` false: the answer's POST could not be served meanwhile).

        Raises:
            Busy: the call budget is taken; nothing runs.
            ShareTaken: the request's client holds its share of the call budget; nothing runs.
        """
        meta = request.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        # Only an HTTP request's stream can be resumed: stdio has no connection to lose.
        streams = session.streams if "REQUEST_METHOD" in environ else None
        sink = new_sink(environ, self.settings.keepalive_interval, streams, self.settings.body_timeout, request.id)
        call = Call(
            session,
            request.id,
            sink,
            token if jsonrpc.valid_id(token) else None,
            self.server.pending,
            self.settings.elicitation_timeout,
            bool(environ.get("wsgi.multithread")),
            environ.get(shares.ENVIRON_KEY),
        )
        try:
            session.begin(call)
        except ValueError as exc:
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        window = self.settings.resume_window
        # The reason is built only when a call is given up: this runs for every call.
        sink.on_close(
            lambda: (
                None
                if sink.finished
                else self.server.abort(
                    call, ClientDisconnected(f"and did not resume the stream within {window:g} s (ZEMCP_RESUME_WINDOW)")
                )
            )
        )

        def job() -> None:
            response = None
            try:
                response = self.server.execute(work, call, operation)
            finally:
                if call.cancelled:
                    response = None  # never answer a cancelled request, whatever ended it
                session.finish(call)
                # Ended before the response is handed over: whoever reads it then sees the span ended.
                operation.finish(response, None if response is not None else "cancelled")
                sink.finish(response)

        try:
            self.server.admission.start(job, sink, environ.get(shares.ENVIRON_KEY))
        except (Busy, ShareTaken):
            session.finish(call)
            raise
        return sink

    def notification(
        self, session: Session, message: jsonrpc.Notification, environ: dict[str, Any] | None = None
    ) -> None:
        """A notification of a live session, whatever the transport: ``notifications/cancelled``
        aborts the named request, ``notifications/initialized`` completes the handshake (MCP
        basic/lifecycle); other notifications are ignored. ``environ`` is the WSGI environ of
        an HTTP request, None for stdio."""
        operation = observed.begin(self.server, message, environ or {}, session.protocol_version, session)
        if message.method == "notifications/cancelled":
            self.cancel(session, message.params)
        elif message.method == "notifications/initialized":
            # Server-to-client requests of the session wait for it (Session.wait_initialized).
            session.mark_initialized()
        operation.finish(None)

    def cancel(self, session: Session, params: dict[str, Any]) -> None:
        """``notifications/cancelled``: abort the named running request of ``session``."""
        # Invalid or unknown ids are ignored, as basic/utilities/cancellation allows.
        request_id, reason = params.get("requestId"), params.get("reason")
        if not jsonrpc.valid_id(request_id):
            return
        reason = reason if isinstance(reason, str) else None
        call = session.call(request_id)
        if call is not None:
            self.server.abort(call, RequestCancelled(reason))
        else:
            session.relay_cancel(request_id, reason)

    def _set_log_level(self, session: Session, request: jsonrpc.Request) -> dict[str, Any]:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}, got {level!r}"
            )
        session.log_level = level
        return {}


def check_protocol_header(value: str | None) -> None:
    """Check a handshake-era ``MCP-Protocol-Version`` request header (absent is accepted).

    Raises:
        ProtocolError: the value is not a handshake version this server supports.
    """
    if value is not None and value in versions.MODERN:
        raise ProtocolError(
            INVALID_REQUEST,
            f"Bad Request: MCP-Protocol-Version {value!r} has no sessions: send the request without "
            f"Mcp-Session-Id and with its params._meta envelope (io.modelcontextprotocol/protocolVersion, "
            f"io.modelcontextprotocol/clientCapabilities)",
        )
    if value is not None and value not in versions.HANDSHAKE:
        raise ProtocolError(
            INVALID_REQUEST,
            f"Bad Request: unsupported MCP-Protocol-Version {value!r} for a session; sessions support "
            f"{', '.join(versions.HANDSHAKE)} (initialize negotiates one)",
        )
