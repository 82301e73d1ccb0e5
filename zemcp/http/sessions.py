"""Handshake-era sessions over HTTP: the ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` headers,
the GET that reads a session's streams and the DELETE that ends it (MCP basic/transports,
"Session Management", "Resumability and Redelivery", "Listening for Messages from the Server").

A POST of a session names it in ``Mcp-Session-Id`` (:func:`session_header`) and may carry the
session's version in ``MCP-Protocol-Version`` (:func:`check_protocol_header`). A GET with ``Last-Event-ID`` resumes a stream of the session: the events after that id are
replayed, then the live ones follow on the new connection. A GET without it opens the
session's standalone stream, which carries list changes and resource updates
(through the server's :class:`zemcp.state.fanout.FanOut`). Each such connection holds a thread
while it reads, so it takes a place in the call budget; without one, a resumed request stream
is delivered as a poll (what it has now, then ``retry``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from zemcp.auth.principal import Principal
from zemcp.core.admission import Busy
from zemcp.core.server import Server
from zemcp.eras.handshake.era import HandshakeEra
from zemcp.http.outcomes import refused
from zemcp.protocol import versions
from zemcp.protocol.jsonrpc import INVALID_REQUEST, ProtocolError
from zemcp.replies.responses import come_back_later, empty_response, error_response, event_stream
from zemcp.replies.streams import LogStream
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.session import Session, fingerprint
from zemcp.state.sessionstore import SessionNotFound, SessionRequired
from zemcp.state.shares import ShareTaken
from zemcp.state.streamlogs import REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound, retry_field

log = logging.getLogger("zemcp.handshake")

SESSION_HEADER = "Mcp-Session-Id"
# The WSGI environ keys of the two headers (PEP 3333: HTTP_ and the name in capitals, - as _),
# read directly on every request of a session.
SESSION_KEY = "HTTP_MCP_SESSION_ID"
VERSION_KEY = "HTTP_MCP_PROTOCOL_VERSION"
#: The text of a refused ``Mcp-Session-Id`` that came more than once.
ONE_SESSION_ID = "Bad Request: send the Mcp-Session-Id header once, with one session id"

#: [seconds] when a standalone GET that found no room is told to come back (its ``retry``).
STANDALONE_RETRY_AFTER = 30


def session_header(environ: dict[str, Any]) -> str | None:
    """The session id a request's ``Mcp-Session-Id`` header names, or None without one.

    Args:
        environ: the request's WSGI environ (its headers read as PEP 3333 keeps them).
    Raises:
        ProtocolError: the header came more than once (repeated headers arrive joined with
            commas; a session id never contains one).
    """
    session_id: str | None = environ.get(SESSION_KEY)
    if session_id is not None and "," in session_id:
        raise ProtocolError(INVALID_REQUEST, ONE_SESSION_ID)
    return session_id


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


class SessionEndpoints:
    """The GET and DELETE of one server's sessions.

    Args:
        server: whose settings, sessions and call budget they use.
        era: finds a request's session (:meth:`zemcp.eras.handshake.era.HandshakeEra.session_of`).
    """

    def __init__(self, server: Server, era: HandshakeEra):
        self.server = server
        self.settings = server.settings
        self._era = era

    def get(self, request: Request, principal: Principal | None, client: str | None) -> Response:
        """GET with ``Mcp-Session-Id``: resume a stream of the session (``Last-Event-ID``), or
        open the session's standalone stream.

        Resuming replays the events after the id, then goes on with the live ones (a request's
        response included) on this connection; the connection that read the stream before
        stops. The standalone stream carries list changes and resource updates
        (the server's :class:`zemcp.state.fanout.FanOut`); a session has one.

        Args:
            request: the GET.
            principal: who its token names (a session of another principal is unknown).
            client: whose fair shares the stream counts in (:func:`zemcp.state.shares.client_key`).
        Returns:
            ``text/event-stream``; 400 for a bad header or id, 404 for an unknown session or
            an event id no stream of the session has, 405 when standalone streams are off,
            406 without ``text/event-stream`` in ``Accept``, 409 when the standalone stream is
            read already, 410 when the events after the id were dropped, 429 or 503 when
            there is no room for another stream.
        Raises:
            StateUnavailable: the shared sessions cannot be reached.
        """
        try:
            session_id = session_header(request.environ)
            check_protocol_header(request.environ.get(VERSION_KEY))
            session = self._era.session_of(session_id, principal)
        except ProtocolError as exc:
            return refused(self.server, error_response(400, exc.code, exc.message))
        except (SessionNotFound, SessionRequired) as exc:
            return refused(self.server, error_response(404, INVALID_REQUEST, str(exc)))
        if not request.accept_mimetypes["text/event-stream"]:
            return refused(
                self.server,
                error_response(
                    406,
                    INVALID_REQUEST,
                    "Not Acceptable: a GET reads an SSE stream; the Accept header must list text/event-stream",
                ),
            )
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:
            return self._resume(request, session, last_event_id, client)
        return self._standalone(request, session, client)

    def delete(self, request: Request, principal: Principal | None) -> Response:
        """End the session named by the request (DELETE): 204, or 404 when it is not live
        (or, with authorization on, belongs to another principal).

        Raises:
            StateUnavailable: the shared sessions cannot be reached.
        """
        try:
            session_id = session_header(request.environ)
            check_protocol_header(request.environ.get(VERSION_KEY))
            self._era.session_of(session_id, principal)
        except ProtocolError as exc:
            return refused(self.server, error_response(400, exc.code, exc.message))
        except (SessionNotFound, SessionRequired) as exc:
            return refused(self.server, error_response(404, INVALID_REQUEST, str(exc)))
        assert session_id is not None  # session_of refused a missing one
        if not self.server.end_session(session_id):
            return refused(
                self.server,
                error_response(404, INVALID_REQUEST, "Session not found: it already ended or was never created here"),
            )
        return empty_response(204)

    def _resume(self, request: Request, session: Session, last_event_id: str, client: str | None) -> Response:
        """Resume the stream of ``session`` that ``last_event_id`` names: replay the events
        after it, then the live ones, on this connection (the one that read it before stops).

        Returns:
            ``text/event-stream``; 400 for an id that is not an event id, 404 for one no stream
            of the session has or for the last event of a request's stream that has ended
            (nothing more will come: a cancelled request has no response), 410 when the
            events after it were dropped; a standalone stream that finds no room is answered
            as :meth:`_standalone` does.
        """
        try:
            stream, after = session.streams.find(last_event_id)
        except BadEventId as exc:
            return refused(self.server, error_response(400, INVALID_REQUEST, str(exc)))
        except StreamNotFound as exc:
            return refused(self.server, error_response(404, INVALID_REQUEST, str(exc)))
        except StreamGone as exc:
            return refused(self.server, error_response(410, INVALID_REQUEST, str(exc)))
        if stream.kind == REQUEST and stream.finished and after >= stream.position:
            # Nothing will ever follow: a 200 stream that only ends would have the client
            # (one whose request was cancelled waits for a response that never comes) come
            # back after every retry until the stream is forgotten.
            return refused(
                self.server,
                error_response(
                    404,
                    INVALID_REQUEST,
                    "Not Found: this request's stream has ended and nothing follows that event (a cancelled "
                    "request gets no response); stop resuming it",
                ),
            )
        # Taking the stream over from a GET that holds a place: that place passes to this one.
        takeover = stream.reader_holds_place
        release: Callable[[], None] | None = None
        # One client must not take the call budget with resumed streams: beyond its share it polls.
        if stream.kind != REQUEST or takeover or session.resumed < self.settings.session_pending_budget:
            held = self._hold(stream.kind, client, takeover=takeover)
            if isinstance(held, Response):
                if stream.kind != REQUEST:
                    return held
            else:
                release = session.count_resumed(held) if stream.kind == REQUEST else held
        # Without a place (no room to hold a thread), deliver what the stream has now and let
        # the client poll again after retry; its request's response comes on a later poll.
        once = release is None
        token = stream.attach(holds_place=not once)
        log.info(
            "session %s: %s stream resumed after event %d%s",
            fingerprint(session.id),
            stream.kind,
            after,
            " (a poll: no thread to hold)" if once else "",
        )
        body = LogStream(
            stream,
            token,
            after,
            retry_field(stream.limits),
            request.environ,
            self.settings.keepalive_interval,
            release,
            self.settings.body_timeout,
            once,
        )
        return event_stream(body)

    def _standalone(self, request: Request, session: Session, client: str | None) -> Response:
        """Open (or reopen) the standalone stream of ``session``: list changes and resource updates.

        Returns:
            ``text/event-stream``; 405 when standalone streams are off, 409 when the stream is
            read already. With no room for another stream (the standalone cap, the call budget
            or the client's share of either), a stream that carries ``retry`` and ends at once,
            since the spec allows this GET no other answer than a stream or 405 and clients
            treat anything else as a failure: the client comes back after
            :data:`STANDALONE_RETRY_AFTER` and holds no thread meanwhile.
        """
        if self.settings.standalone_budget == 0:
            return refused(
                self.server,
                error_response(
                    405,
                    INVALID_REQUEST,
                    "Method Not Allowed: this server offers no standalone SSE stream "
                    "(ZEMCP_MAX_STANDALONE_STREAMS=0); messages for a request arrive on that request's POST response",
                    headers={"Allow": "POST, DELETE, OPTIONS"},
                ),
            )
        stream = session.streams.standalone
        if stream is not None and stream.attached:
            return refused(
                self.server,
                error_response(
                    409,
                    INVALID_REQUEST,
                    "Conflict: this session's standalone stream is already open on another connection; close it, "
                    "or resume it with the Last-Event-ID of its last event",
                ),
            )
        release = self._hold(STANDALONE, client)
        if isinstance(release, Response):
            return release
        if stream is None or stream.finished or stream.abandoned():
            stream = session.streams.open(STANDALONE)
            self.server.subscriptions.open_session(session.id, stream, session.subscribed)
        token = stream.attach(holds_place=True)
        first = stream.prime()
        body = LogStream(
            stream,
            token,
            stream.position,
            first,
            request.environ,
            self.settings.keepalive_interval,
            release,
            self.settings.body_timeout,
        )
        return event_stream(body)

    def _hold(self, kind: str, client: str | None, takeover: bool = False) -> Callable[[], None] | Response:
        """A place in the thread budget (and in the request's client's share of it) for a GET
        that reads a stream: the function that gives it back, or, with no room, the answer
        that tells the client to come back later (:func:`come_back_later`). A ``takeover``
        (the connection it replaces holds a place, which it gives back as it stops) always
        gets one."""
        try:
            return self.server.admission.hold_thread(kind, force=takeover, client=client)
        except (ListenLimitReached, Busy, ShareTaken) as exc:
            log.info("no room for a GET of a %s stream: %s", kind, exc)
            return come_back_later(str(exc), STANDALONE_RETRY_AFTER)
