"""The seams for what a session shares: one small interface for each kind of shared state.

Four kinds of state outlive a single HTTP request, and each is reached only through the
interface here, so that where it is kept is one decision (:func:`zemcp.state.open_state`):

- :class:`SessionStore`: the handshake-era sessions (MCP basic/transports, "Session
  Management"), found by ``Mcp-Session-Id``;
- :class:`WaitingCalls`: the server-to-client requests (elicitation, sampling, roots) whose
  handlers wait for the client's answer, found by (session id, request id);
- :class:`StreamLogs` and :class:`EventLog`: a session's resumable SSE streams and their
  events (MCP basic/transports, "Resumability and Redelivery");
- :class:`FanOut`: who hears a change notification (``subscriptions/listen`` streams of
  2026-07-28, and the standalone GET streams of sessions).

The in-process implementations are :mod:`zemcp.state.registry`,
:mod:`zemcp.state.correlation`, :mod:`zemcp.state.eventlogs` and
:mod:`zemcp.state.subscriptions`; ``tests/unit/test_state_contracts.py`` is the contract
every implementation passes. A running call, and the thread that waits for its answers,
always stay in the process that runs it: the interfaces say how answers, cancellations and
notifications reach it, not where its thread lives.

Also here, because every implementation shares them: the types the state layer sees of the
layers above it (:class:`Outlet`, :class:`Channel`, :class:`RunningCall`), the lookup errors
and the stream kinds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from zemcp.config import StreamLimits
    from zemcp.protocol import jsonrpc
    from zemcp.protocol.elicitation import ElicitAborted
    from zemcp.state.delivery import Delivery

#: The session record a :class:`SessionStore` keeps (:class:`zemcp.state.session.Session`).
S = TypeVar("S")

#: Yielded by a stream's reader (a reply sink's frames, an event log's read) when nothing
#: happened for one keep-alive interval: the writer then sends an SSE comment.
KEEPALIVE = object()

#: Stream kinds: the upgraded response of a request, and a session's standalone GET stream.
REQUEST, STANDALONE = "request", "standalone"


def retry_field(limits: StreamLimits) -> bytes:
    """The SSE ``retry`` field (whole milliseconds, at least 1) ending in a blank line."""
    return f"retry: {max(1, round(limits.retry * 1000))}\n\n".encode()


# -- what the state layer sees of the layers above -------------------------------------


class Outlet(Protocol):
    """Where a running request's messages go (its reply sink), as a waiting call uses it.

    Attributes:
        tick_interval: [seconds] how often a waiting handler lets the sink :meth:`tick`.
    """

    tick_interval: float

    def send(self, message: dict[str, Any]) -> bool:
        """Queue one JSON-RPC message on the request's stream; False when nobody reads it any more."""

    def tick(self) -> None:
        """Let the sink do its periodic work on the waiting thread (keep-alives, a client gone)."""


class Channel(Protocol):
    """A stream that a ``subscriptions/listen`` request holds open (its reply sink)."""

    def send(self, message: dict[str, Any]) -> bool:
        """Queue one notification on the stream; False when nobody reads it any more."""

    def finish(self, response: dict[str, Any] | None) -> None:
        """End the stream with the listen request's response."""

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once when the stream's reader is gone."""


class Identified(Protocol):
    """Anything with a session id (a session record, as the waiting-calls table sees it)."""

    @property
    def id(self) -> str: ...


class RunningCall(Protocol):
    """A running request of a session, as sessions and the waiting-calls table see it
    (:class:`zemcp.eras.handshake.call.Call`).

    Attributes:
        session: the session it belongs to.
        request_id: its JSON-RPC id.
        sink: where its messages go.
        client_key: whose fair shares it counts in (:func:`zemcp.state.shares.client_key`),
            or None (stdio: one client, no shares).
    """

    @property
    def session(self) -> Identified: ...

    @property
    def sink(self) -> Outlet: ...

    request_id: jsonrpc.RequestId
    client_key: str | None

    def abort(self, reason: ElicitAborted) -> bool:
        """Mark it as one that can no longer be answered; True if this set the reason."""

    def raise_if_aborted(self) -> None:
        """Raise the abort reason, if any."""


class Withdrawal:
    """Lets another thread withdraw the requests of one :meth:`WaitingCalls.ask_all` at once,
    before or while it waits (an ``async def`` handler stopped awaiting them): the table
    :meth:`attach` es the end of its waits, and :meth:`withdraw` ends them with its reason,
    so that ``ask_all`` sends ``notifications/cancelled`` for each and frees the thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reason: BaseException | None = None
        self._end: Callable[[BaseException], object] | None = None

    def attach(self, end: Callable[[BaseException], object]) -> None:
        """``end(reason)`` ends the registered waits; raises the reason if already withdrawn."""
        with self._lock:
            self._end, reason = end, self.reason
        if reason is not None:
            raise reason

    def withdraw(self, reason: BaseException) -> None:
        """End the waits with ``reason`` (its text is the ``notifications/cancelled`` reason)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason, end = reason, self._end
        if end is not None:
            end(reason)


# -- errors every implementation raises ------------------------------------------------


class SessionError(Exception):
    """Base of the session lookup failures; the transport maps each to an HTTP status."""


class SessionRequired(SessionError):
    """A request other than ``initialize`` came without ``Mcp-Session-Id`` (HTTP 400)."""


class SessionNotFound(SessionError):
    """The ``Mcp-Session-Id`` names no live session (HTTP 404)."""


class SessionLimitReached(SessionError):
    """``initialize`` found ``max_sessions`` live sessions (HTTP 429 with ``Retry-After``)."""


class StateUnavailable(Exception):
    """The service that keeps the shared state (Redis) cannot be reached or did not answer in
    time; the message says which and what to check (HTTP 503 with ``Retry-After``).

    Attributes:
        retry_after: [seconds] when to try again.
    """

    def __init__(self, message: str, retry_after: int = 2):
        super().__init__(message)
        self.retry_after = retry_after


class CapacityError(Exception):
    """A cap on pending server-to-client requests is reached; the message names the cap and its value.

    Attributes:
        advice: what the handler can do about it, for the message it gets.
    """

    def __init__(self, message: str, advice: str = "answer or cancel the pending ones first"):
        super().__init__(message)
        self.advice = advice


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not an event id of this server (HTTP 400)."""


class StreamNotFound(LookupError):
    """No stream of the session has that event id: it never existed here, belongs to another
    session, or was forgotten after its window (HTTP 404)."""


class StreamGone(LookupError):
    """The events after that id were dropped from the stream's replay buffer (HTTP 410)."""


class ListenLimitReached(Exception):
    """The cap on streams that listen for notifications is reached; the message names the cap."""


# -- the four seams ----------------------------------------------------------------------


class SessionStore(Protocol[S]):
    """The live sessions (records of type ``S``).

    Attributes:
        instance: the name of this process's instance, the prefix of the session ids it creates.
        max_sessions: live sessions at most.
        ttl: [seconds] idle time after which a session is ended.
        shared: True when sessions outlive this process (other processes serve them), so a
            stopping process ends only its own calls, not the sessions.
    """

    instance: str
    shared: bool
    max_sessions: int
    ttl: float

    def create(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        principal: str | None = None,
    ) -> S:
        """Create and register a session, bound to ``principal`` (a principal key) when given.

        Raises:
            SessionLimitReached: ``max_sessions`` sessions are live.
        """

    def get(self, session_id: str | None) -> S:
        """The live session named ``session_id``, its idle timer reset.

        Raises:
            SessionRequired: ``session_id`` is None.
            SessionNotFound: no live session has that id.
        """

    def end(self, session_id: str, why: str) -> bool:
        """End a session (its ``on_end`` callback runs); False when it was not live."""

    def sweep(self, now: float | None = None) -> int:
        """End every session idle longer than ``ttl`` (``now``: ``time.monotonic()``
        seconds); returns how many ended."""

    def sessions(self) -> list[S]:
        """The live sessions, oldest first."""

    def local(self) -> list[S]:
        """The sessions this process holds now (all of them, where sessions live in one process)."""

    def close(self) -> None:
        """This process stops using the store (its background work ends)."""

    def __contains__(self, session_id: object) -> bool: ...

    def __len__(self) -> int: ...


class WaitingCalls(Protocol):
    """Server-to-client requests whose handler waits for the client's answer (the correlation table).

    Attributes:
        max_pending: requests waiting at once at most, in this process.
        max_per_session: requests of one session waiting at once at most.
    """

    max_pending: int
    max_per_session: int

    def ask_all(
        self,
        call: RunningCall,
        requests: list[tuple[str, dict[str, Any]]],
        timeout: float,
        withdrawal: Withdrawal | None = None,
    ) -> list[jsonrpc.Response]:
        """Send ``(method, params)`` requests on ``call``'s stream and wait for every answer.

        Args:
            timeout: [seconds] the longest wait for all of them together.
            withdrawal: ends the wait early with its reason when withdrawn.
        Returns:
            the client's responses, in the order of ``requests``.
        Raises:
            CapacityError: a cap is reached, or ``requests`` are more than a cap allows at
                once; nothing was sent.
            TypeError, ValueError: params hold a value JSON cannot carry; nothing was sent.
            TimeoutError: not every answer arrived in time.
            the call's abort reason (request cancelled, session ended, client disconnected),
            or the withdrawal's.
        """

    def resolve(self, session_id: str, answer: jsonrpc.Response) -> Delivery:
        """Hand the client's answer to its request; what became of it (an id of another session is NOT_WAITING)."""

    def end_session(self, session_id: str, reason: BaseException) -> int:
        """Wake every request of the session that waits, with ``reason``; returns how many."""

    def end_call(self, call: RunningCall, reason: BaseException) -> int:
        """Wake every request of ``call`` that waits, with ``reason``; returns how many."""

    def count(self, session_id: str | None = None) -> int:
        """Requests waiting, in one session or (None) in the whole process."""


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


class FanOut(Protocol):
    """Who hears a change notification: listen streams and sessions' standalone streams.

    Attributes:
        max_streams: ``subscriptions/listen`` streams open at once at most.
    """

    max_streams: int

    def honoured(
        self, requested: Any, supported: dict[str, bool]
    ) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
        """The part of a listen request's ``notifications`` filter this server honours: the
        acknowledged filter, the list-changed methods and the resource URIs.

        Raises:
            ValueError: the filter is malformed (the message says how).
        """

    def open(
        self,
        subscription_id: jsonrpc.RequestId,
        acknowledged: dict[str, Any],
        kinds: frozenset[str],
        uris: frozenset[str],
        sink: Channel,
    ) -> Channel:
        """Listen on ``sink`` (the acknowledgement is sent on it first); returns it.

        Raises:
            ListenLimitReached: ``max_streams`` streams are open.
        """

    def open_session(self, session_id: str, log: EventLog, subscribed: Callable[[str], bool]) -> None:
        """Let a session's standalone stream ``log`` hear changes (replacing an earlier one of the
        session); ``subscribed(uri)`` (the session's :meth:`zemcp.state.session.Session.subscribed`)
        says whether the session subscribed to a resource, which a backend that shares sessions
        between processes reads from the session's record instead."""

    def drop_session(self, session_id: str) -> None:
        """Forget a session's standalone stream (the session ended)."""

    def list_changed(self, flag: str) -> int:
        """Announce that a list changed (``toolsListChanged``, ``promptsListChanged`` or
        ``resourcesListChanged``); returns how many streams were told."""

    def resource_updated(self, uri: str) -> int:
        """Announce ``notifications/resources/updated`` for ``uri``; returns how many streams were told."""

    def close_all(self, result: dict[str, Any]) -> int:
        """End every listen stream with ``result`` for its request; returns how many."""

    def count(self) -> int:
        """Open ``subscriptions/listen`` streams."""
