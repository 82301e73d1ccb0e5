"""Resumable SSE streams kept in Redis (MCP basic/transports, "Resumability and Redelivery"; SEP-1699).

The Redis implementation of :class:`zemcp.state.streamlogs.StreamLogs` (:class:`RedisStreamLogs`)
and :class:`zemcp.state.streamlogs.EventLog` (:class:`RedisEventLog`), with the observable
behaviour of :mod:`zemcp.state.eventlogs` (its docstrings are the spec: the same SSE bytes and
event ids ``<stream id>-<n>``, bounds, windows and single-reader rule), valid across every
process that shares the Redis. A GET with ``Last-Event-ID`` on any process replays what the
client missed, then follows what the writer's process appends; a connection that attaches
anywhere stops the reader everywhere else. The keys, scripts and expiry are
:mod:`zemcp.state.redis.replay`'s.

A reader polls Redis at least every :data:`FOLLOW_BLOCK` seconds (``XREAD BLOCK`` on the
stream's events and control streams between); one on another process that stayed silent for
:data:`READER_LEASE` seconds (its process died) no longer counts as reading. A request stream
whose writer's node stopped its heartbeat (:meth:`zemcp.state.redis.node.Node.alive`) before
the stream finished is ended, by the reader that follows it or the GET that resumes it, with a
-32603 error for its request: the client learns it within seconds instead of waiting for ever.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from zemcp.config import StreamLimits
from zemcp.protocol import jsonrpc
from zemcp.state import streamlogs
from zemcp.state.eventlogs import parse_event_id
from zemcp.state.redis.client import text
from zemcp.state.redis.replay import Look, RedisReplay, ms
from zemcp.state.streamlogs import KEEPALIVE, REQUEST, STANDALONE, StreamGone, StreamNotFound, retry_field
from zemcp.state.unavailable import StateUnavailable

log = logging.getLogger("zemcp.redis")

#: [seconds] a reader on another process that has not polled for this long is taken for gone.
READER_LEASE = 3.0
#: [seconds] the longest ``XREAD BLOCK`` of a reader: between two, it polls (renewing its
#: lease) and, at most this often, checks that the writer's process is alive.
FOLLOW_BLOCK = 1.0
#: [seconds] how long :meth:`RedisEventLog.reads` trusts the reader its thread's last write saw.
HINT_FOR = 0.1
#: The message of the error that ends a request stream whose writer died.
WRITER_DIED = (
    "Internal error: the server process that ran this request stopped before it answered (it was killed or "
    "crashed); send the request again"
)
_NOT_FOUND = (
    "Not Found: no stream of this session has that event id (it belongs to another session, or the stream "
    "ended and was forgotten); send the request again"
)


def _priming(stream_id: str, n: int, limits: StreamLimits) -> bytes:
    """The priming event numbered ``n`` of a stream (SEP-1699): an id, ``retry`` and empty data."""
    return f"id: {stream_id}-{n}\n".encode() + retry_field(limits)[:-1] + b"data:\n\n"


class RedisEventLog:
    """The events of one SSE stream kept in Redis, and which connection (of any process) reads them.

    Made by :class:`RedisStreamLogs`; behaves as :class:`zemcp.state.eventlogs.EventLog`. Every
    method is a round trip to Redis, except that :meth:`reads` and :meth:`abandoned` right after
    this thread's :meth:`append` answer from what it saw; a stream whose keys expired behaves as
    finished, unread and expired, but where this process writes it, keys gone mean that Redis
    lost its data: :meth:`append`, :meth:`finish` and :meth:`reads` raise ``StreamLost`` then.

    Args:
        replay: this process's :class:`zemcp.state.redis.replay.RedisReplay`.
        session_id: the session it belongs to.
        stream_id: the part of its event ids before the last ``-``.
        kind: :data:`REQUEST` or :data:`STANDALONE`.

    Attributes:
        id, kind, limits: as :class:`zemcp.state.streamlogs.EventLog`.
        keys: its Redis keys: its hash, its events, its control stream, the session's hash.
    """

    def __init__(self, replay: RedisReplay, session_id: str, stream_id: str, kind: str):
        self.id = stream_id
        self.kind = kind
        self.limits = replay.limits
        self._replay = replay
        state = replay.redis.key("stream", session_id, stream_id)
        self.keys = [state, state + ":events", state + ":control", replay.redis.key("streams", session_id)]
        # [monotonic seconds] no connection stopped reading before this (abandoned() is False
        # until a window after it); the reader this thread's last write saw; bytes at the end.
        self._floor: float | None = None
        self._hint = threading.local()
        self.final_size: int | None = None

    def run(self, script: str, *args: Any) -> Any:
        """Run one of :data:`zemcp.state.redis.replay.SCRIPTS` on this stream's keys.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        self._hint.reader = None
        with self._replay.redis.guard():
            return self._replay.scripts[script](self.keys, args)

    def _write(self, payload: bytes | None, mode: str, writer: str = "") -> list[Any]:
        # The "write" script: append, or finish (with ``writer``: only a stream that node writes).
        limits, replay = self.limits, self._replay
        args = (self.id, payload or b"", limits.max_events, limits.max_bytes, replay.ttl, replay.node.ensure())
        got = self.run("write", *args, ms(READER_LEASE), writer, mode)
        if int(got[1]) < 0:
            replay.lost(self)  # its keys are gone: raises for a stream this process writes
        now = time.monotonic()
        if int(got[2]) >= 0:
            self._floor = now - int(got[2]) / 1000
        self._hint.reader = (int(got[1]), now)
        return list(got)

    # -- writing -------------------------------------------------------------------------

    def prime(self) -> bytes:
        """A priming event for a new connection: a fresh id, ``retry`` and empty data (SEP-1699).

        Raises:
            StreamNotFound: the stream's keys expired.
            StateUnavailable: Redis cannot be reached.
        """
        n = int(self.run("prime", self._replay.ttl))
        if not n:
            raise StreamNotFound(_NOT_FOUND)
        return _priming(self.id, n, self.limits)

    def append(self, payload: bytes) -> bytes | None:
        """Add a ``message`` event carrying ``payload`` (one JSON-RPC message, encoded), trimming
        the oldest events beyond ``max_events`` and ``max_bytes``.

        Returns:
            the event as SSE bytes; None when the stream is finished (nothing is added).
        Raises:
            StateUnavailable: Redis cannot be reached, or lost this stream (``StreamLost``).
        """
        return self._write(payload, "append")[0] or None

    def finish(self, payload: bytes | None) -> bytes | None:
        """End the stream, with its last event (the response) or without (a cancelled request).

        Returns:
            the last event as SSE bytes, or None (also when it had finished already).
        Raises:
            StateUnavailable: Redis cannot be reached, or lost this stream (``StreamLost``).
        """
        got = self._write(payload, "finish")
        self.final_size = int(got[3] or 0)
        self._replay.stop_renewing(self)
        return got[0] or None

    def _writer_died(self, writer: str, request: Any) -> None:
        # Only the first process to see it ends the stream: the script checks it is unfinished.
        payload = jsonrpc.encode(jsonrpc.error(request, jsonrpc.INTERNAL_ERROR, WRITER_DIED))
        if self._write(payload, "finish", writer)[0]:
            log.warning("stream %s: its writer %s stopped before it answered; ended with an error", self.id, writer)

    # -- connections ---------------------------------------------------------------------

    def attach(self, holds_place: bool = False) -> int:
        """Make a new connection the stream's reader; an earlier one, on any process, stops at once.

        Args:
            holds_place: the connection holds a place of this process's thread budget (a GET).
        Returns:
            the connection's token, unique among the stream's connections of every process.
        Raises:
            StreamNotFound: the stream's keys expired.
            StateUnavailable: Redis cannot be reached.
        """
        token = int(self.run("attach", int(holds_place), self._replay.node.ensure(), self._replay.ttl))
        if not token:
            raise StreamNotFound(_NOT_FOUND)
        self._floor = time.monotonic()
        return token

    @property
    def reader_holds_place(self) -> bool:
        """True while the reading connection holds a place of this process's thread budget
        (one that a connection taking over here can take): a reader elsewhere holds none here."""
        return self._look().holds_here

    @property
    def attached(self) -> bool:
        """True while a connection reads the stream: one of this process, or one of another
        process that polled within :data:`READER_LEASE` (the writer's own connection, which does
        not poll, counts only in the writer's process, the one that asks about it)."""
        return self._look().attached

    @property
    def position(self) -> int:
        """The number of the stream's latest event (priming events included)."""
        return self._look().seq

    def reads(self, token: int) -> bool:
        """True while the connection of ``token`` is the stream's reader.

        Right after this thread's :meth:`append` or :meth:`finish` (within :data:`HINT_FOR`), the
        reader that write saw answers, without a second round trip: a takeover in between is
        seen at the next call, as it would be a moment later anyway.
        """
        hint = getattr(self._hint, "reader", None)
        self._hint.reader = None
        if hint is not None and time.monotonic() - hint[1] < HINT_FOR:
            return bool(hint[0] == token)
        return self._replay.reader(self) == token

    def detach(self, token: int) -> None:
        """The connection of ``token`` ended; the stream waits ``window`` seconds for another."""
        if int(self.run("detach", token, self._replay.ttl)):
            self._floor = time.monotonic()

    def end_connection(self) -> None:
        """Ask the reading connection, on whichever process, to end after a ``retry`` field (SSE polling)."""
        self.run("end", self._replay.ttl)

    def check(self, after: int) -> None:
        """Check that reading can resume after event ``after``; a request stream whose writer
        died is first ended with a -32603 error for its request.

        Raises:
            StreamNotFound: no event of this stream has that number yet.
            StreamGone: events after it were dropped from the buffer.
            StateUnavailable: Redis cannot be reached.
        """
        self._check(self._look(), after)

    def _check(self, state: Look, after: int) -> None:
        if self._orphaned(state.writer, state.final) and not self._replay.node.alive(state.writer):
            self._writer_died(state.writer, state.request)
            state = self._look()
        if after > state.seq:
            raise StreamNotFound("Not Found: no stream of this session has that event id")
        if after < state.dropped:
            raise StreamGone(
                f"Gone: the events after {self.id}-{after} no longer fit this stream's replay buffer "
                f"(ZEMCP_STREAM_BUFFER_EVENTS, ZEMCP_STREAM_BUFFER_BYTES); they cannot be replayed"
            )

    def _orphaned(self, writer: str, final: int) -> bool:
        # An unfinished request stream written by another process: its end depends on that process.
        return bool(writer) and final < 0 and writer != self._replay.node.ensure()

    def read(self, token: int, after: int, tick: float) -> Iterator[object]:
        """The events after ``after``, then the live ones from any process, for the connection of ``token``.

        Args:
            token: from :meth:`attach`.
            after: the number of the last event the client has (0: from the start).
            tick: [seconds] yield :data:`zemcp.state.streamlogs.KEEPALIVE` after this long without events.
        Yields:
            SSE bytes, or KEEPALIVE; ends as :meth:`zemcp.state.eventlogs.EventLog.read` does,
            after the -32603 error that ends a request stream whose writer died, and quietly
            when Redis fails (logged): the client then reconnects.
        """
        redis = self._replay.redis
        cursor, quiet = after, time.monotonic()
        checked = quiet
        try:
            while True:
                got = self.run("poll", token, cursor, self._replay.ttl)
                if got[0] == b"ending":
                    yield retry_field(self.limits)
                    return
                if got[0] != b"ok":
                    return
                cursor, final, writer, events = int(got[1]), int(got[2]), text(got[4]), got[6:]
                now = time.monotonic()
                if events:
                    yield from events
                    quiet = now
                if 0 <= final <= cursor:
                    return
                if not events and now - quiet >= tick:
                    yield KEEPALIVE
                    quiet = now
                if self._orphaned(writer, final) and now - checked >= FOLLOW_BLOCK:
                    checked = now
                    if not self._replay.node.alive(writer):
                        self._writer_died(writer, json.loads(got[5]))
                        continue
                block = min(FOLLOW_BLOCK, tick - (time.monotonic() - quiet))
                with redis.guard():
                    redis.blocking.xread(
                        {self.keys[1]: f"0-{cursor}", self.keys[2]: f"0-{text(got[3])}"},
                        count=1,
                        block=max(1, ms(block)),
                    )
        except StateUnavailable:
            return

    # -- lifetime ------------------------------------------------------------------------

    def _look(self, now: float | None = None) -> Look:
        mono = time.monotonic()
        offset = 0 if now is None else ms(now - mono)
        me, window = self._replay.node.ensure(), ms(self.limits.window)
        state = Look.parse(self.run("look", self.id, me, offset, window, ms(READER_LEASE)))
        if state.read_ago >= 0:
            self._floor = mono - state.read_ago / 1000
        return state

    @property
    def finished(self) -> bool:
        """True once the stream's last event was added (or it ended without one)."""
        return self._look().final >= 0

    @property
    def size(self) -> int:
        """[bytes] held by the replay buffer."""
        return self._look().size

    def abandoned(self, now: float | None = None) -> bool:
        """True when no connection has read the stream for longer than ``window`` seconds
        (``now``: ``time.monotonic()`` seconds). Answered without Redis while the last thing
        this object saw proves it False."""
        now = time.monotonic() if now is None else now
        floor = self._floor
        if floor is not None and now - floor <= self.limits.window:
            return False
        return self._look(now).abandoned

    def expired(self, now: float | None = None) -> bool:
        """True when the stream can be forgotten: finished longer than ``window`` ago, or (a
        standalone stream) abandoned; an unfinished request stream waits for its handler."""
        return self._look(now).expired


class RedisStreamLogs:
    """The streams of one session, kept in Redis, as every process sees them.

    Behaves as :class:`zemcp.state.eventlogs.SessionStreams`. A stream's object is the same
    while someone holds it (:meth:`find` and :attr:`standalone` return it), and a new one,
    reading the same keys, in another process. Streams past their window are forgotten by
    :meth:`prune` (the session store's sweep), not on each :meth:`open`; their keys expire anyway.

    Args:
        replay: this process's :class:`zemcp.state.redis.replay.RedisReplay`.
        session_id: the session's id.
    """

    def __init__(self, replay: RedisReplay, session_id: str):
        self.session_id = session_id
        self.limits = replay.limits
        self._replay = replay
        self._key = replay.redis.key("streams", session_id)
        self._lock = threading.Lock()
        self._logs: weakref.WeakValueDictionary[str, RedisEventLog] = weakref.WeakValueDictionary()
        self._closed = False

    def _log(self, stream_id: str, kind: str) -> RedisEventLog:
        with self._lock:
            known = self._logs.get(stream_id)
            if known is None:
                known = self._logs[stream_id] = RedisEventLog(self._replay, self.session_id, stream_id, kind)
            return known

    def _known(self) -> list[RedisEventLog]:
        # The session's hash holds stream id -> kind, and ":standalone" -> the standalone stream's id.
        with self._replay.redis.guard():
            fields = self._replay.redis.client.hgetall(self._key)
        return [self._log(text(k), text(v)) for k, v in fields.items() if not text(k).startswith(":")]

    def open(self, kind: str = REQUEST, request_id: jsonrpc.RequestId | None = None) -> RedisEventLog:
        """A new stream of the session (the standalone one replaces any earlier).

        Args:
            kind: :data:`REQUEST` (written by this process, which its heartbeat keeps) or
                :data:`STANDALONE` (written by any process).
            request_id: the JSON-RPC id of the request a request stream answers: the id of the
                error that ends the stream if this process dies before it does.
        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        return self._open(kind, request_id, "")[0]

    def open_reading(
        self, request_id: jsonrpc.RequestId | None = None, first: bytes | None = None
    ) -> tuple[RedisEventLog, int, bytes]:
        """A new request stream read from the start by the connection of the request that opens
        it, in one round trip: the log, that connection's token, and the priming event followed
        by the event of ``first`` (a message, when given).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        log, data = self._open(REQUEST, request_id, "read", first)
        log._floor = time.monotonic()
        return log, 1, _priming(log.id, 1, self.limits) + data

    def _open(
        self, kind: str, request_id: jsonrpc.RequestId | None, read: str, first: bytes | None = None
    ) -> tuple[RedisEventLog, bytes]:
        log = RedisEventLog(self._replay, self.session_id, secrets.token_urlsafe(12), kind)
        writer = self._replay.node.ensure() if kind == REQUEST else ""
        ids = (log.id, kind, writer, json.dumps(request_id), self._replay.ttl, read)
        data = log.run("open", *ids, first or b"", self.limits.max_events, self.limits.max_bytes)
        with self._lock:
            self._logs[log.id] = log
        if kind == REQUEST:
            self._replay.renew_while_writing(log)
        return log, data or b""

    @property
    def standalone(self) -> RedisEventLog | None:
        """The session's standalone GET stream, or None.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        with self._replay.redis.guard():
            stream_id = self._replay.redis.client.hget(self._key, ":standalone")
        return None if stream_id is None else self._log(text(stream_id), STANDALONE)

    def ended(self, log: streamlogs.EventLog) -> None:
        """A request's stream finished: count it in this process's ``held`` for its window."""
        if not self._closed and isinstance(log, RedisEventLog):
            self._replay.keep(log, log.final_size if log.final_size is not None else log.size)

    def find(self, event_id: str) -> tuple[RedisEventLog, int]:
        """The stream an event id names, and the event's number; a request stream whose writer
        died is first ended with a -32603 error for its request.

        Raises:
            BadEventId: not an event id of this server.
            StreamNotFound: no live stream of this session has it.
            StreamGone: the events after it were dropped.
            StateUnavailable: Redis cannot be reached.
        """
        stream_id, after = parse_event_id(event_id)
        with self._lock:
            log = self._logs.get(stream_id) or RedisEventLog(self._replay, self.session_id, stream_id, REQUEST)
        state = log._look()
        if not state.member or state.expired:
            raise StreamNotFound(_NOT_FOUND)
        log.kind = state.kind
        with self._lock:
            log = self._logs.setdefault(stream_id, log)
        log._check(state, after)
        return log, after

    def prune(self, now: float | None = None) -> list[streamlogs.EventLog]:
        """Forget the streams whose window has passed, or whose keys expired; returns them.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        gone: list[streamlogs.EventLog] = [log for log in self._known() if log.expired(now)]
        for log in gone:
            self.forget(log)
        return gone

    def forget(self, log: streamlogs.EventLog) -> None:
        """Drop one stream from the session (resuming it then gets 404; its keys expire).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        if isinstance(log, RedisEventLog):
            log.run("forget", log.id)
            self._replay.release(log)

    def close(self) -> list[streamlogs.EventLog]:
        """The session ended: end its standalone stream and forget every stream; returns them.

        A request's stream is ended by its handler, which the session's end wakes: a
        connection still reading it, on any process, gets that last response.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        logs = self._known()
        self._closed = True
        with self._replay.redis.guard():
            self._replay.redis.client.delete(self._key)
        for log in logs:
            if log.kind == STANDALONE:
                log.finish(None)
            self._replay.release(log)
        closed: list[streamlogs.EventLog] = list(logs)
        return closed

    def __len__(self) -> int:
        """The streams the session knows (those whose keys expired count until :meth:`prune`)."""
        return len(self._known())
