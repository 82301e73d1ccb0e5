"""The stream-logs seam: a session's resumable SSE streams and their events.

MCP basic/transports, "Resumability and Redelivery" (SEP-1699): each SSE stream of a session
(the upgraded response of a request, and the session's standalone GET stream) keeps its
events with ids, so that a GET with ``Last-Event-ID`` resumes it on a new connection.
:class:`StreamLogs` holds the streams of one session and :class:`EventLog` one stream
(in-process: :mod:`zemcp.state.eventlogs`; Redis: :mod:`zemcp.state.redis.eventlogs`);
:class:`ByteBudget` bounds what finished streams keep in a process. Also here: the stream
kinds, :data:`KEEPALIVE`, the SSE ``retry`` field, and the lookup errors of a
``Last-Event-ID``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zemcp.config import StreamLimits
    from zemcp.protocol import jsonrpc

#: Yielded by a stream's reader (a reply sink's frames, an event log's read) when nothing
#: happened for one keep-alive interval: the writer then sends an SSE comment.
KEEPALIVE = object()

#: Stream kinds: the upgraded response of a request, and a session's standalone GET stream.
REQUEST, STANDALONE = "request", "standalone"


def retry_field(limits: StreamLimits) -> bytes:
    """The SSE ``retry`` field (whole milliseconds, at least 1) ending in a blank line."""
    return f"retry: {max(1, round(limits.retry * 1000))}\n\n".encode()


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not an event id of this server (HTTP 400)."""


class StreamNotFound(LookupError):
    """No stream of the session has that event id: it never existed here, belongs to another
    session, or was forgotten after its window (HTTP 404)."""


class StreamGone(LookupError):
    """The events after that id were dropped from the stream's replay buffer (HTTP 410)."""


class EventLog(Protocol):
    """The events of one SSE stream, and which connection reads them.

    Attributes:
        id: the stream's id, the part of its event ids before the last ``-``.
        kind: :data:`REQUEST` or :data:`STANDALONE`.
        limits: its buffer bounds and windows.
    """

    id: str
    kind: str
    limits: StreamLimits

    def prime(self) -> bytes:
        """A priming event for a new connection (SEP-1699)."""

    def append(self, payload: bytes) -> bytes | None:
        """Add a ``message`` event carrying one encoded JSON-RPC message; returns its SSE
        bytes, or None once the stream finished."""

    def finish(self, payload: bytes | None) -> bytes | None:
        """End the stream with its last event (or none); returns that event's SSE bytes."""

    def attach(self, holds_place: bool = False) -> int:
        """Make a new connection the reader (an earlier one stops); returns its token."""

    @property
    def reader_holds_place(self) -> bool:
        """True while the reading connection holds a place of the thread budget (a GET)."""

    @property
    def attached(self) -> bool:
        """True while a connection reads the stream."""

    @property
    def position(self) -> int:
        """The number of the stream's latest event."""

    def reads(self, token: int) -> bool:
        """True while the connection of ``token`` is the reader."""

    def detach(self, token: int) -> None:
        """The connection of ``token`` ended; the stream waits for another."""

    def end_connection(self) -> None:
        """Ask the reading connection to end after a ``retry`` field (SSE polling)."""

    def check(self, after: int) -> None:
        """Raise :class:`StreamGone` unless reading can resume after event ``after``."""

    def read(self, token: int, after: int, tick: float) -> Iterator[object]:
        """The SSE bytes of the events after ``after``, then the live ones, for ``token``;
        :data:`KEEPALIVE` after ``tick`` seconds without events."""

    @property
    def finished(self) -> bool:
        """True once the stream's last event was added."""

    @property
    def size(self) -> int:
        """[bytes] held in the replay buffer."""

    def abandoned(self, now: float | None = None) -> bool:
        """True when no connection has read the stream for longer than its window."""

    def expired(self, now: float | None = None) -> bool:
        """True when the stream can be forgotten."""


class StreamLogs(Protocol):
    """The resumable streams of one session, by stream id."""

    @property
    def standalone(self) -> EventLog | None:
        """The session's standalone GET stream, or None."""

    def open(self, kind: str = REQUEST, request_id: jsonrpc.RequestId | None = None) -> EventLog:
        """A new stream of the session (the standalone one replaces any earlier).

        Args:
            kind: :data:`REQUEST` or :data:`STANDALONE`.
            request_id: the JSON-RPC id of the request a :data:`REQUEST` stream answers, so
                that a backend whose streams outlive the process that writes them can end one
                with an error for that request when that process dies; None when unknown.
        """

    def open_reading(
        self, request_id: jsonrpc.RequestId | None = None, first: bytes | None = None
    ) -> tuple[EventLog, int, bytes]:
        """A new request stream read from the start by the connection of the request that opens
        it: the log, that connection's token, and the SSE bytes to write first: the priming
        event, then the event of ``first`` (one encoded message) when given (what :meth:`open`,
        :meth:`EventLog.attach`, :meth:`EventLog.prime` and :meth:`EventLog.append` give, in
        one step)."""

    def ended(self, log: EventLog) -> None:
        """A request's stream finished: keep it for its window, within the process's byte budget."""

    def find(self, event_id: str) -> tuple[EventLog, int]:
        """The stream a ``Last-Event-ID`` names, and the event's number.

        Raises:
            BadEventId: not an event id of this server.
            StreamNotFound: no stream of this session has it.
        """

    def prune(self, now: float | None = None) -> list[EventLog]:
        """Forget the streams whose window has passed; returns them."""

    def forget(self, log: EventLog) -> None:
        """Drop one stream (resuming it then gets 404)."""

    def close(self) -> list[EventLog]:
        """The session ended: end its standalone stream and forget every stream; returns them
        (a request's stream is ended by its handler, which the session's end wakes)."""

    def __len__(self) -> int: ...


class ByteBudget(Protocol):
    """A process-wide bound on bytes kept for resumption, as the server's status reads it."""

    @property
    def held(self) -> int:
        """[bytes] kept now."""
