"""The handshake era: ``initialize``, sessions and pushed server requests, whatever the transport.

MCP 2024-11-05 to 2025-11-25 (basic/lifecycle): ``initialize`` negotiates a version and
creates a session (over HTTP named by ``Mcp-Session-Id`` on every later request, basic/transports
"Session Management"; over stdio the connection's); ``ping``, ``logging/setLevel`` and resource
subscriptions act on the session; a handler's questions for the client (elicitation, sampling,
roots) go out as JSON-RPC requests on its request's stream and its thread waits for the answers,
which arrive as JSON-RPC responses (:class:`zemcp.eras.handshake.call.Call`, the waiting calls);
``notifications/cancelled`` and the end of the session end waits.

:meth:`HandshakeEra.serve` takes one message and its
:class:`zemcp.eras.requestcontext.RequestContext` and gives its outcome; the transport has
found the message's session first (:meth:`HandshakeEra.session_of`) and says what the outcome
means on its wire (HTTP: :mod:`zemcp.http.outcomes`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from zemcp import logsafe
from zemcp.auth.access import Access
from zemcp.auth.principal import Principal
from zemcp.core.server import Server, Work
from zemcp.eras.handshake import tasks
from zemcp.eras.handshake.call import Call
from zemcp.eras.requestcontext import Outcome, RequestContext, Running
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.capabilities import LOG_LEVELS, check_size
from zemcp.protocol.elicitation import ClientDisconnected, RequestCancelled
from zemcp.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from zemcp.state.session import UNKNOWN_SESSION, Session, fingerprint
from zemcp.state.sessionstore import SessionNotFound

log = logging.getLogger("zemcp.handshake")


class HandshakeEra:
    """Serves handshake-era requests of one :class:`Server`.

    Args:
        server: the MCP server core.
    """

    def __init__(self, server: Server):
        self.server = server
        self.settings = server.settings
        self._session_methods: dict[str, Callable[[Session, jsonrpc.Request, Access], dict[str, Any]]] = {
            "ping": lambda session, request, access: {},
            "logging/setLevel": lambda session, request, access: self._set_log_level(session, request),
            "resources/subscribe": lambda s, r, a: self.server.subscribe(s, r.params, a),
            "resources/unsubscribe": lambda s, r, a: self.server.resources.unsubscribe(s, r.params),
        }

    def serve(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve one message of the handshake era.

        Args:
            message: ``initialize``, or a message of the session in ``context.session`` (which
                the transport found with :meth:`session_of`).
            context: the message's context; ``initialize`` sets its ``session``.
        Returns:
            a JSON-RPC response; a :class:`zemcp.eras.requestcontext.Running` call; for a
            client's answer (a JSON-RPC response) what became of it
            (:class:`zemcp.state.waitingcalls.Delivery`); None for a notification.
        Raises:
            ProtocolError: (``initialize``) bad params.
            SessionLimitReached: (``initialize``) the process holds ``max_sessions`` sessions.
            SessionNotFound: the session ended while the request arrived.
            InsufficientScope: the principal lacks a scope of the tool, prompt or resource.
            TaskLimitReached: a task cannot be created (``max_tasks``, the client's share, a stop).
        """
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            return self.initialize(message, context)
        session = context.session
        assert session is not None  # the transport found it, or refused the message
        if isinstance(message, jsonrpc.Response):
            return self.server.pending.resolve(session.id, message)
        if isinstance(message, jsonrpc.Notification):
            self.notification(session, message)
            return None
        return self._request(session, message, context)

    def session_of(self, session_id: str | None, principal: Principal | None) -> Session:
        """The live session ``session_id`` names, if ``principal`` is the one it belongs to.

        Raises:
            SessionRequired: ``session_id`` is None.
            SessionNotFound: no live session has that id, or it belongs to another principal
                (logged: a session id used with someone else's token is a hijack attempt or a
                leaked id).
            StateUnavailable: the shared sessions cannot be reached.
        """
        return self._owned(self.server.sessions.get(session_id), principal)

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

    def initialized(self, session_id: str, principal: Principal | None) -> bool:
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

    def initialize(self, request: jsonrpc.Request, context: RequestContext) -> dict[str, Any]:
        """``initialize``: negotiate the version and create a session (MCP basic/lifecycle).

        Returns:
            the JSON-RPC response with the ``InitializeResult``; ``context.session`` is the new session.
        Raises:
            ProtocolError: -32602 for bad params (no string ``protocolVersion``, capabilities
                or clientInfo not objects or over ``max_client_info_bytes``).
            SessionLimitReached: the process holds ``max_sessions`` sessions.
        """
        session, result = self._open_session(request, context.principal)
        session.transport = context.transport
        context.session = session
        context.operation.negotiated(session.protocol_version, fingerprint(session.id))
        return jsonrpc.result(request.id, result)

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
            "serverInfo": self.server.implementation(version),
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

    def _request(self, session: Session, request: jsonrpc.Request, context: RequestContext) -> Outcome:
        """A request of a live session: a JSON-RPC response, or the call that runs its handler."""
        try:
            method = self._session_methods.get(request.method)
            if method is not None:
                return jsonrpc.result(request.id, method(session, request, context.access))
            if request.method in tasks.METHODS:
                return tasks.serve(self.server, session, request, context)
            if request.method not in self.server.methods():
                return jsonrpc.error(request.id, METHOD_NOT_FOUND, f"Method not found: {request.method}")
            outcome = self.server.prepare(session, request, context.access)
            if isinstance(outcome, Work):
                task = tasks.requested(self.server, session, request, outcome)
                if task is not None:
                    return tasks.create(self.server, session, request, outcome, task, context.client)
                return self._start(session, request, outcome, context)
            return tasks.not_created(self.server, session, request, outcome) or jsonrpc.result(request.id, outcome)
        except ProtocolError as exc:
            return jsonrpc.error(request.id, exc.code, exc.message, exc.data)

    def _start(self, session: Session, request: jsonrpc.Request, work: Work, context: RequestContext) -> Running:
        """Set up ``work`` as a call of ``session``; its sink tells JSON from stream.

        Under a WSGI server that is not multithreaded the call cannot wait for answers
        (``context.can_wait``: the answer's POST could not be served meanwhile).

        Raises:
            ProtocolError: the session runs a request with the same id.
        """
        meta = request.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        sink = context.open_sink(session.streams, request.id)
        call = Call(
            session,
            request.id,
            sink,
            token if jsonrpc.valid_id(token) else None,
            self.server.pending,
            self.settings.elicitation_timeout,
            context.can_wait,
            context.client,
        )
        call.operation = context.operation
        call.site_request = context.request
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
                response = self.server.execute(work, call)
            finally:
                if call.cancelled:
                    response = None  # never answer a cancelled request, whatever ended it
                session.finish(call)
                # The layers hear of the end before the response is handed over.
                context.finish(response, call.ending)
                sink.finish(response)

        return Running(job, sink, lambda: session.finish(call))

    def notification(self, session: Session, message: jsonrpc.Notification) -> None:
        """A notification of a live session: ``notifications/cancelled`` aborts the named
        request, ``notifications/initialized`` completes the handshake (MCP
        basic/lifecycle); other notifications are ignored."""
        if message.method == "notifications/cancelled":
            self.cancel(session, message.params)
        elif message.method == "notifications/initialized":
            # Server-to-client requests of the session wait for it (Session.wait_initialized).
            session.mark_initialized()

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
