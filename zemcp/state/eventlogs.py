"""Resumable SSE streams of the handshake era (MCP basic/transports, "Resumability and Redelivery"; SEP-1699).

Every SSE stream of a session (the upgraded response of a request, and the session's
standalone GET stream) keeps an :class:`EventLog`: its events, each with an event id
``<stream id>-<n>`` (unique within the session and naming the stream it belongs to), in a
bounded replay buffer. A connection reads the log from a position; when the connection
drops, or the server ends it on purpose (SSE polling), the stream lives on: the handler
keeps running, its events are kept, and a GET with ``Last-Event-ID`` reattaches a new
connection, which is given the events after that id, then the live ones.

A stream nobody reads is given up after ``resume_window`` seconds (its request is then
cancelled, as a disconnect used to be at once); a finished stream is kept that long too,
for a client that lost the connection just before the response, within a process-wide
byte budget. The 2026-07-28 era has no resumption and does not use this module. Pure
threading, no HTTP.

This is the in-process implementation of :class:`zemcp.state.streamlogs.StreamLogs`
(:class:`SessionStreams`) and :class:`zemcp.state.streamlogs.EventLog`.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from functools import partial

from zemcp.config import StreamLimits
from zemcp.protocol.jsonrpc import RequestId
from zemcp.state import streamlogs
from zemcp.state.streamlogs import KEEPALIVE, REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound, retry_field

#: An event id: the stream id (URL-safe base64), ``-``, the event's number (ASCII digits, from 1).
_EVENT_ID = re.compile(r"([A-Za-z0-9_-]{1,64})-([1-9][0-9]{0,17})")


def parse_event_id(value: str) -> tuple[str, int]:
    """Split an event id ``<stream id>-<n>`` into the stream id and ``n``.

    Raises:
        BadEventId: the value does not have that form.
    """
    match = _EVENT_ID.fullmatch(value.strip())
    if match is None:
        raise BadEventId(
            f"Bad Request: Last-Event-ID {value[:80]!r} is not an event id of this server; send the id of the "
            f"last event received on the stream, once, to resume"
        )
    return match.group(1), int(match.group(2))


class EventLog:
    """The events of one SSE stream, and which connection reads them.

    Writers add events (:meth:`append`, :meth:`finish`); a connection attaches
    (:meth:`attach`, which takes the stream from any earlier connection) and reads
    (:meth:`read`), or writes what :meth:`append` returns itself when it is the writer's own
    connection. The buffer holds at most ``limits.max_events`` events and ``limits.max_bytes``
    bytes; older events are dropped, and resuming from before them raises :class:`StreamGone`.

    Args:
        kind: :data:`REQUEST` or :data:`STANDALONE`.
        limits: the buffer bounds and windows.

    Attributes:
        id: the stream's id, the part of its event ids before the last ``-``.
        kind: as given.
    """

    def __init__(self, kind: str, limits: StreamLimits):
        self.id = secrets.token_urlsafe(12)
        self.kind = kind
        self.limits = limits
        self._cond = threading.Condition()
        self._events: deque[tuple[int, bytes]] = deque()
        self._bytes = 0
        self._seq = 0
        self._dropped = 0
        self._finished = False
        self._final_seq = 0
        self._reader = 0
        self._holds_place = False
        self._tokens = 0
        self._ending = 0
        now = time.monotonic()
        self._detached_at: float | None = now
        self._finished_at: float | None = None

    # -- writing -------------------------------------------------------------------------

    def prime(self) -> bytes:
        """A priming event for a new connection: a fresh id, ``retry`` and empty data (SEP-1699).

        Kept out of the buffer (there is nothing to replay), but resuming from its id is valid.
        """
        with self._cond:
            self._seq += 1
            return f"id: {self.id}-{self._seq}\n".encode() + retry_field(self.limits)[:-1] + b"data:\n\n"

    def append(self, payload: bytes) -> bytes | None:
        """Add a ``message`` event carrying ``payload`` (one JSON-RPC message, encoded).

        Returns:
            the event as SSE bytes, for a writer whose own connection is attached to write;
            None when the stream is already finished (nothing is added).
        """
        with self._cond:
            if self._finished:
                return None
            return self._add(payload)

    def finish(self, payload: bytes | None) -> bytes | None:
        """End the stream, with its last event (the response) or without (a cancelled request).

        Returns:
            the last event as SSE bytes, or None.
        """
        with self._cond:
            if self._finished:
                return None
            data = self._add(payload) if payload is not None else None
            self._finished = True
            self._final_seq = self._seq
            self._finished_at = time.monotonic()
            return data

    def _add(self, payload: bytes) -> bytes:
        # Called with the lock held.
        self._seq += 1
        data = b"id: " + f"{self.id}-{self._seq}".encode() + b"\nevent: message\ndata: " + payload + b"\n\n"
        self._events.append((self._seq, data))
        self._bytes += len(data)
        limits = self.limits
        while len(self._events) > 1 and (len(self._events) > limits.max_events or self._bytes > limits.max_bytes):
            seq, dropped = self._events.popleft()
            self._bytes -= len(dropped)
            self._dropped = seq
        self._cond.notify_all()
        return data

    # -- connections ---------------------------------------------------------------------

    def attach(self, holds_place: bool = False) -> int:
        """Make a new connection the stream's reader; an earlier one stops at once.

        Args:
            holds_place: the connection holds a place of the thread budget of its own (a
                GET), which it gives back when it stops; so a connection that takes over
                from it needs no new place.
        Returns:
            the connection's token (for :meth:`read`, :meth:`reads`, :meth:`detach`).
        """
        with self._cond:
            self._tokens += 1
            self._reader = self._tokens
            self._holds_place = holds_place
            self._detached_at = None
            self._cond.notify_all()
            return self._reader

    @property
    def reader_holds_place(self) -> bool:
        """True while the reading connection holds a place of the thread budget (a GET)."""
        return self._reader != 0 and self._holds_place

    @property
    def attached(self) -> bool:
        """True while a connection reads the stream."""
        return self._reader != 0

    @property
    def position(self) -> int:
        """The number of the stream's latest event (priming events included)."""
        return self._seq

    def reads(self, token: int) -> bool:
        """True while the connection of ``token`` is the stream's reader."""
        return self._reader == token

    def detach(self, token: int) -> None:
        """The connection of ``token`` ended; the stream waits ``window`` seconds for another."""
        with self._cond:
            if self._reader == token:
                self._reader = 0
                self._detached_at = time.monotonic()
                self._cond.notify_all()

    def end_connection(self) -> None:
        """Ask the reading connection to end after a ``retry`` field (SSE polling); the stream lives on."""
        with self._cond:
            self._ending = self._reader
            self._cond.notify_all()

    def check(self, after: int) -> None:
        """Check that reading can resume after event ``after``.

        Raises:
            StreamNotFound: no event of this stream has that number yet.
            StreamGone: events after it were dropped from the buffer.
        """
        with self._cond:
            if after > self._seq:
                raise StreamNotFound("Not Found: no stream of this session has that event id")
            if after < self._dropped:
                raise StreamGone(
                    f"Gone: the events after {self.id}-{after} no longer fit this stream's replay buffer "
                    f"(ZEMCP_STREAM_BUFFER_EVENTS, ZEMCP_STREAM_BUFFER_BYTES); they cannot be replayed"
                )

    def read(self, token: int, after: int, tick: float) -> Iterator[object]:
        """The events after ``after``, then the live ones, for the connection of ``token``.

        Args:
            token: from :meth:`attach`.
            after: the number of the last event the client has (0: from the start).
            tick: [seconds] yield :data:`zemcp.state.streamlogs.KEEPALIVE` after this long without events.
        Yields:
            SSE bytes, or KEEPALIVE; ends after the last event of a finished stream, when
            another connection took the stream, when events the client did not get were
            dropped (it then resumes and learns they are gone), or with a ``retry`` field
            when :meth:`end_connection` asked this connection to end.
        """
        cursor = after
        while True:
            with self._cond:
                self._cond.wait_for(partial(self._ready, token, cursor), tick)
                if self._reader != token or cursor < self._dropped:
                    return
                if self._ending == token:
                    self._ending = 0
                    ending = True
                else:
                    ending = False
                events = [data for seq, data in self._events if seq > cursor]
                cursor = self._seq
                done = self._finished and cursor >= self._final_seq
            if ending:
                yield retry_field(self.limits)
                return
            if not events and not done:
                yield KEEPALIVE
            yield from events
            if done:
                return

    def _ready(self, token: int, cursor: int) -> bool:
        # Called with the lock held: something for the reader of ``token`` at ``cursor``.
        return (
            self._reader != token
            or self._ending == token
            or self._seq > cursor
            or (self._finished and cursor >= self._final_seq)
        )

    # -- lifetime ------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """True once the stream's last event was added (or it ended without one)."""
        return self._finished

    @property
    def size(self) -> int:
        """[bytes] held by the replay buffer."""
        return self._bytes

    def abandoned(self, now: float | None = None) -> bool:
        """True when no connection has read the stream for longer than ``window`` seconds."""
        detached = self._detached_at
        now = time.monotonic() if now is None else now
        return self._reader == 0 and detached is not None and now - detached > self.limits.window

    def expired(self, now: float | None = None) -> bool:
        """True when the stream can be forgotten: finished longer than ``window`` ago, or (a
        standalone stream, which never finishes) abandoned. A request's stream that nobody
        reads is kept until its handler ends it: the request is given up, and its last
        response stays resumable for another window."""
        now = time.monotonic() if now is None else now
        finished = self._finished_at
        if finished is not None:
            return now - finished > self.limits.window
        return self.kind == STANDALONE and self.abandoned(now)


class ReplayBudget:
    """The process-wide bound on bytes kept by finished streams (``Settings.max_replay_bytes``).

    A finished stream is kept ``window`` seconds for a client that missed its end; when the
    finished streams of all sessions hold more than the budget, the oldest are forgotten
    first (resuming them then gets 404).

    Args:
        max_bytes: [bytes] the budget.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[streamlogs.EventLog, SessionStreams] = OrderedDict()
        self._bytes = 0

    def keep(self, log: streamlogs.EventLog, owner: SessionStreams) -> None:
        """Count a finished stream; forget the oldest finished streams beyond the budget."""
        evicted: list[tuple[streamlogs.EventLog, SessionStreams]] = []
        with self._lock:
            if log in self._kept:
                return
            self._kept[log] = owner
            self._bytes += log.size
            now = time.monotonic()
            # Oldest first: the front is the first to expire, or to go when over the budget.
            while self._kept and (self._bytes > self.max_bytes or next(iter(self._kept)).expired(now)):
                old, old_owner = self._kept.popitem(last=False)
                self._bytes -= old.size
                evicted.append((old, old_owner))
        for old, old_owner in evicted:
            old_owner.forget(old)

    def release(self, log: streamlogs.EventLog) -> None:
        """Stop counting a stream that was forgotten."""
        with self._lock:
            if self._kept.pop(log, None) is not None:
                self._bytes -= log.size

    @property
    def held(self) -> int:
        """[bytes] held by the finished streams counted."""
        return self._bytes


class SessionStreams:
    """The streams of one session, by stream id.

    Args:
        limits: the knobs of every stream.
        budget: the process's :class:`ReplayBudget`.
    """

    def __init__(self, limits: StreamLimits, budget: ReplayBudget):
        self.limits = limits
        self._budget = budget
        self._lock = threading.Lock()
        self._logs: dict[str, streamlogs.EventLog] = {}
        self._closed = False
        self.standalone: streamlogs.EventLog | None = None

    def open(self, kind: str = REQUEST, request_id: RequestId | None = None) -> streamlogs.EventLog:
        """A new stream of the session (the standalone one replaces any earlier); ``request_id``
        is not needed here: the streams end with the process that writes them."""
        self.prune()
        log = EventLog(kind, self.limits)
        with self._lock:
            self._logs[log.id] = log
            if kind == STANDALONE:
                old, self.standalone = self.standalone, log
                if old is not None:
                    self._logs.pop(old.id, None)
        return log

    def open_reading(
        self, request_id: RequestId | None = None, first: bytes | None = None
    ) -> tuple[streamlogs.EventLog, int, bytes]:
        """A new request stream read from the start by the connection that opens it: the log,
        that connection's token, and the priming event followed by the event of ``first``."""
        log = self.open(REQUEST, request_id)
        token, priming = log.attach(), log.prime()
        return log, token, priming + ((log.append(first) or b"") if first is not None else b"")

    def ended(self, log: streamlogs.EventLog) -> None:
        """A request's stream finished: keep it ``window`` seconds within the process budget."""
        with self._lock:
            known = not self._closed and self._logs.get(log.id) is log
        if known:
            self._budget.keep(log, self)

    def find(self, event_id: str) -> tuple[streamlogs.EventLog, int]:
        """The stream an event id names, and the event's number.

        Raises:
            BadEventId: not an event id of this server.
            StreamNotFound: no live stream of this session has it.
            StreamGone: the events after it were dropped.
        """
        stream_id, after = parse_event_id(event_id)
        self.prune()
        with self._lock:
            log = self._logs.get(stream_id)
        if log is None:
            raise StreamNotFound(
                "Not Found: no stream of this session has that event id (it belongs to another session, or "
                "the stream ended and was forgotten); send the request again"
            )
        log.check(after)
        return log, after

    def prune(self, now: float | None = None) -> list[streamlogs.EventLog]:
        """Forget the streams whose window has passed; returns them."""
        now = time.monotonic() if now is None else now
        with self._lock:
            gone = [log for log in self._logs.values() if log.expired(now)]
        for log in gone:
            self.forget(log)
        return gone

    def forget(self, log: streamlogs.EventLog) -> None:
        """Drop one stream (resuming it then gets 404)."""
        with self._lock:
            if self._logs.get(log.id) is log:
                del self._logs[log.id]
            if self.standalone is log:
                self.standalone = None
        self._budget.release(log)

    def close(self) -> list[streamlogs.EventLog]:
        """The session ended: end its standalone stream and forget every stream; returns them.

        A request's stream is ended by its handler, which the session's end wakes: a
        connection still reading it gets that last response.
        """
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
            self.standalone = None
            self._closed = True
        for log in logs:
            if log.kind == STANDALONE:
                log.finish(None)
            self._budget.release(log)
        return logs

    def __len__(self) -> int:
        with self._lock:
            return len(self._logs)
