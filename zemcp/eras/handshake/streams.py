"""A session's SSE streams read by GET (MCP basic/transports, "Resumability and Redelivery"
and "Listening for Messages from the Server").

A GET with ``Last-Event-ID`` resumes a stream of the session: the events after that id are
replayed, then the live ones follow on the new connection. A GET without it opens the
session's standalone stream, which carries list changes and resource updates
(through the server's :class:`zemcp.state.fanout.FanOut`). Each such connection holds a thread
while it reads, so it takes a place in the call budget; without one, a resumed request stream
is delivered as a poll (what it has now, then ``retry``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from werkzeug.wrappers import Request, Response

from zemcp.core.admission import Busy
from zemcp.core.server import Server
from zemcp.protocol.jsonrpc import INVALID_REQUEST
from zemcp.replies.responses import come_back_later, error_response, event_stream
from zemcp.replies.streams import LogStream
from zemcp.state import shares
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.session import Session, fingerprint
from zemcp.state.shares import ShareTaken
from zemcp.state.streamlogs import REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound, retry_field

log = logging.getLogger("zemcp.handshake")

#: [seconds] when a standalone GET that found no room is told to come back (its ``retry``).
STANDALONE_RETRY_AFTER = 30


class Streams:
    """The GET side of the sessions' streams of one server.

    Args:
        server: whose settings and call budget the streams use.
    """

    def __init__(self, server: Server):
        self.server = server
        self.settings = server.settings

    def resume(self, request: Request, session: Session, last_event_id: str) -> Response:
        """Resume the stream of ``session`` that ``last_event_id`` names: replay the events
        after it, then the live ones, on this connection (the one that read it before stops).

        Returns:
            ``text/event-stream``; 400 for an id that is not an event id, 404 for one no stream
            of the session has or for the last event of a request's stream that has ended
            (nothing more will come: a cancelled request has no response), 410 when the
            events after it were dropped; a standalone stream that finds no room is answered
            as :meth:`standalone` does.
        """
        try:
            stream, after = session.streams.find(last_event_id)
        except BadEventId as exc:
            return error_response(400, INVALID_REQUEST, str(exc))
        except StreamNotFound as exc:
            return error_response(404, INVALID_REQUEST, str(exc))
        except StreamGone as exc:
            return error_response(410, INVALID_REQUEST, str(exc))
        if stream.kind == REQUEST and stream.finished and after >= stream.position:
            # Nothing will ever follow: a 200 stream that only ends would have the client
            # (one whose request was cancelled waits for a response that never comes) come
            # back after every retry until the stream is forgotten.
            return error_response(
                404,
                INVALID_REQUEST,
                "Not Found: this request's stream has ended and nothing follows that event (a cancelled request "
                "gets no response); stop resuming it",
            )
        # Taking the stream over from a GET that holds a place: that place passes to this one.
        takeover = stream.reader_holds_place
        release: Callable[[], None] | None = None
        # One client must not take the call budget with resumed streams: beyond its share it polls.
        if stream.kind != REQUEST or takeover or session.resumed < self.settings.session_pending_budget:
            held = self._hold(stream.kind, request, takeover=takeover)
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

    def standalone(self, request: Request, session: Session) -> Response:
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
            return error_response(
                405,
                INVALID_REQUEST,
                "Method Not Allowed: this server offers no standalone SSE stream (ZEMCP_MAX_STANDALONE_STREAMS=0); "
                "messages for a request arrive on that request's POST response",
                headers={"Allow": "POST, DELETE, OPTIONS"},
            )
        stream = session.streams.standalone
        if stream is not None and stream.attached:
            return error_response(
                409,
                INVALID_REQUEST,
                "Conflict: this session's standalone stream is already open on another connection; close it, or "
                "resume it with the Last-Event-ID of its last event",
            )
        release = self._hold(STANDALONE, request)
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

    def _hold(self, kind: str, request: Request, takeover: bool = False) -> Callable[[], None] | Response:
        """A place in the thread budget (and in the request's client's share of it) for a GET
        that reads a stream: the function that gives it back, or, with no room, the answer
        that tells the client to come back later (:func:`come_back_later`). A ``takeover``
        (the connection it replaces holds a place, which it gives back as it stops) always
        gets one."""
        try:
            return self.server.admission.hold_thread(
                kind, force=takeover, client=request.environ.get(shares.ENVIRON_KEY)
            )
        except (ListenLimitReached, Busy, ShareTaken) as exc:
            log.info("no room for a GET of a %s stream: %s", kind, exc)
            return come_back_later(str(exc), STANDALONE_RETRY_AFTER)
