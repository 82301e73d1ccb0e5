"""Replies written from the request's own thread under gunicorn, through PEP 3333 ``write``.

:class:`DirectSink` is the reply sink of a handler that runs on the gunicorn thread serving its
request; :class:`DirectResponse`, its WSGI response, runs the handler and answers plain JSON or,
from the first message the handler sends, an event stream (MCP basic/transports, Streamable
HTTP). In a session the stream is resumable and can be ended on purpose for SSE polling, which
the gunicorn helpers here do without ending the handler.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from werkzeug.http import HTTP_STATUS_CODES

from zemcp.replies.encoding import encode
from zemcp.replies.sinks import CloseCallbacks
from zemcp.replies.streams import GONE, OPEN, PEER_CHECK_INTERVAL, SSE_HEADERS, PeerWatch
from zemcp.state.streamlogs import retry_field
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from wsgiref.types import StartResponse

    from zemcp.protocol.jsonrpc import RequestId
    from zemcp.state.streamlogs import EventLog, StreamLogs


class DirectSink(CloseCallbacks):
    """A reply sink that writes straight to the client from the handler's own thread.

    Under gunicorn (the WSGI environ carries ``gunicorn.socket``, ``wsgi.multithread`` is true)
    the handler runs on the request's thread itself: PEP 3333 lets an application call
    ``start_response`` late and write through the ``write`` callable it returns. So the first
    message a handler sends commits ``text/event-stream`` and is written at once; a handler that
    finishes without sending anything is answered ``application/json``. A pending elicitation
    then costs one thread, not two, and a plain call needs no hand-over between threads.

    With ``streams`` (a handshake-era session's) the stream is resumable: it starts with a
    priming event, every event has an id and is kept in an :class:`zemcp.state.streamlogs.EventLog`,
    and a client that went away is waited for (``StreamLimits.window``) while the handler
    runs on; its events reach the GET that resumes the stream. :meth:`end_stream` ends the
    connection on purpose (SSE polling) while the handler goes on.

    The same interface as :class:`zemcp.replies.sinks.ReplySink` (``send``, ``finish``, ``on_close``,
    ``close``, ``finished``), plus :meth:`tick`, which a waiting handler calls about every
    second to write keep-alive comments and to notice a client that left.

    Args:
        environ: the request's WSGI environ (its ``gunicorn.socket`` is peeked at).
        keepalive: [seconds] between keep-alive comments while the stream waits.
        streams: the session's streams, for a resumable stream; None for one that is not (2026-07-28).
        send_timeout: [seconds] the longest a write may wait for a client that reads nothing;
            the client then counts as gone. None: no bound.
        request_id: the id of the request the stream answers (for a resumable stream).
    """

    direct = True
    # Defaults of the state a plain call never changes, as class attributes: a call that
    # answers plain JSON sets none of them.
    _write: Callable[[bytes], object] | None = None
    _start_response: StartResponse | None = None
    _last_write = 0.0
    _opened = 0.0
    started = False
    _finished = False
    final: dict[str, Any] | None = None
    #: The handler's job, run by :class:`DirectResponse` on the request's thread.
    job: Callable[[], None] | None = None
    #: The stream's events, once it started (resumable streams only).
    log: EventLog | None = None
    _token = 0
    # True while the first event went out with the stream's opening (see _start_stream).
    _folded = False
    _peer_watch: PeerWatch | None = None

    def __init__(
        self,
        environ: dict[str, Any],
        keepalive: float,
        streams: StreamLogs | None = None,
        send_timeout: float | None = None,
        request_id: RequestId | None = None,
    ):
        super().__init__()
        self._request_id = request_id
        self._client = environ["gunicorn.socket"]
        self._keepalive = keepalive
        #: [seconds] how often a waiting handler calls :meth:`tick`.
        self.tick_interval = min(PEER_CHECK_INTERVAL, keepalive)
        self._lock = threading.Lock()
        self.streams = streams
        self._send_timeout = send_timeout

    @property
    def _peer(self) -> PeerWatch:
        # Made with the stream: a plain call never looks at its client's socket.
        peer = self._peer_watch
        if peer is None:
            peer = self._peer_watch = PeerWatch(self._client)
        return peer

    def bind(self, start_response: StartResponse) -> None:
        """Take the WSGI ``start_response`` of the request (before the job runs)."""
        self._start_response = start_response

    def send(self, message: dict[str, Any]) -> bool:
        """Write a message that precedes the response; the first one starts the stream.

        Returns:
            False when the request already finished, or its client is gone (for a resumable
            stream: gone longer than the resumption window), and the message is dropped; else True.
        """
        give_up = gone = False
        with self._lock:
            if self._closed or self._finished:
                return False
            if self.log is not None and self._abandoned(self.log, time.monotonic()):
                give_up = True
            else:
                gone = not self._write_event(encode(message))
        if give_up or (gone and self.log is None):
            self.close()
            return False
        return True

    def _write_event(self, payload: bytes) -> bool:
        # Called with the lock held. False when the client's connection failed.
        try:
            self._start_stream(payload)
        except OSError:
            self._lost()
        if self._folded:
            # The stream's opening carried this first event.
            self._folded = False
            return True
        log = self.log
        if log is None:
            try:
                self._emit(b"event: message\ndata: " + payload + b"\n\n")
            except OSError:
                return False
            self._last_write = time.monotonic()
            return True
        try:
            data = log.append(payload)
        except StateUnavailable:
            # The stream's log cannot keep it now: this connection still gets it (not resumable).
            data = b"event: message\ndata: " + payload + b"\n\n"
        if data is not None and self._reads(log):
            try:
                self._emit(data)
            except OSError:
                self._lost()
                return False
            self._last_write = time.monotonic()
            poll = log.limits.poll_interval
            if poll and self._last_write - self._opened >= poll:
                self._end_own()
        return True

    def tick(self) -> None:
        """While the handler waits: notice a client that left, write a keep-alive when due, end
        the connection after ``poll_interval``, give up on a client gone past the window."""
        give_up = gone = False
        with self._lock:
            if not self.started or self._closed or self._finished:
                return
            log = self.log
            now = time.monotonic()
            if log is not None and not self._reads(log):
                # Another connection reads the stream, or none: only the window is left to watch.
                give_up = self._abandoned(log, now)
            elif (seen := self._peer.look()) == GONE:
                gone = True
            else:
                poll = log.limits.poll_interval if log is not None else 0.0
                if poll and now - self._opened >= poll:
                    self._end_own()
                elif seen != OPEN or now - self._last_write >= self._keepalive:
                    try:
                        self._emit(b": keep-alive\n\n")
                        self._last_write = now
                    except OSError:
                        gone = True
            if not give_up and gone:
                if log is None:
                    give_up = True
                else:
                    self._lost()
        if give_up:
            self.close()

    def _reads(self, log: EventLog) -> bool:
        # While the shared state cannot tell, this connection counts as the reader: keep serving it.
        try:
            return log.reads(self._token)
        except StateUnavailable:
            return True

    def _abandoned(self, log: EventLog, now: float) -> bool:
        try:
            return log.abandoned(now)
        except StateUnavailable:
            return False

    def end_stream(self) -> None:
        """End the client's connection now, with a ``retry`` field, and go on (SSE polling,
        SEP-1699): the client reconnects with ``Last-Event-ID`` and gets the rest there.

        Starts the stream first if nothing was sent yet. Nothing happens for a stream that
        is not resumable, or when the connection cannot be ended cleanly here.
        """
        with self._lock:
            if self.streams is None or self._closed or self._finished:
                return
            try:
                self._start_stream()
            except OSError:
                self._lost()
            log = self.log
            assert log is not None  # _start_stream opened it
            if log.reads(self._token):
                self._end_own()
            else:
                log.end_connection()

    def finish(self, response: dict[str, Any] | None) -> None:
        """Give the final response (``None``: the request was cancelled, send no response)."""
        with self._lock:
            if not self._finished:
                self._finished = True
                self.final = response

    def last_event(self) -> bytes | None:
        """After :meth:`finish`: the final response's event for this connection to write, or None
        (a cancelled request, or a resumable stream whose connection was lost or taken over:
        the response then waits in the stream's log)."""
        final = self.final
        log = self.log
        if log is None:
            return b"event: message\ndata: " + encode(final) + b"\n\n" if final is not None else None
        try:
            data = log.finish(encode(final) if final is not None else None)
            assert self.streams is not None  # a log belongs to a session's streams
            self.streams.ended(log)
            return data if log.reads(self._token) else None
        except StateUnavailable:
            # The stream's log cannot keep the response now: this connection still gets it.
            return b"event: message\ndata: " + encode(final) + b"\n\n" if final is not None else None

    @property
    def finished(self) -> bool:
        """True once the final response (or its absence) was given."""
        return self._finished

    def _start_stream(self, first: bytes | None = None) -> None:
        # Called with the lock held. A resumable stream's opening carries ``first`` (then
        # ``_folded`` is set): one round trip of its log less.
        if self.started:
            return
        start_response = self._start_response
        assert start_response is not None  # bound before the job runs
        self._write = start_response("200 OK", [("Content-Type", "text/event-stream"), *SSE_HEADERS.items()])
        self.started = True
        self._opened = time.monotonic()
        if self._send_timeout is not None:
            # A client that stops reading must not hold the handler in a write for ever.
            self._client.settimeout(self._send_timeout)
        if self.streams is None:
            return
        self.log, self._token, opening = self.streams.open_reading(self._request_id, first)
        self._folded = first is not None
        if self.log.limits.poll_interval:
            # This connection will be ended on purpose: say so before the headers go out.
            _close_after(self._write)
        self._emit(opening)
        self._last_write = time.monotonic()

    def _end_own(self) -> None:
        # Called with the lock held: end this request's own connection, the stream lives on.
        log = self.log
        assert log is not None and self._write is not None
        try:
            ended = _gunicorn_response(self._write) is not None
            if ended:
                self._emit(retry_field(log.limits))
                _close_after(self._write)
                _end_body(self._write)
        except OSError:
            ended = True
        if ended:
            log.detach(self._token)

    def _lost(self) -> None:
        # Called with the lock held: the connection failed; the stream waits for a resuming GET.
        if self.log is not None:
            self.log.detach(self._token)

    def _emit(self, data: bytes) -> None:
        # Called with the lock held, once the stream has started.
        write = self._write
        assert write is not None  # _start_stream set it
        write(data)
        self._peer.wrote()


def _gunicorn_response(write: Callable[[bytes], object]) -> Any:
    # gunicorn's ``write`` callable is a method of its Response, which owns the framing.
    response = getattr(write, "__self__", None)
    return response if hasattr(response, "sock") and hasattr(response, "chunked") else None


def _close_after(write: Callable[[bytes], object]) -> None:
    """Make gunicorn close the connection after this response, and say ``Connection: close``
    when the headers have not gone out yet: a stream ended early by :func:`_end_body` must
    not have a next request read from its connection. Streams of sessions otherwise keep
    their connections alive (a client's next call reuses it: one connection set-up less per
    eliciting call); one ended early without notice is half-closed at once, which clients
    take as the end of the connection."""
    response = _gunicorn_response(write)
    if response is not None and hasattr(response, "force_close"):
        response.force_close()


def _end_body(write: Callable[[bytes], object]) -> None:
    """End a gunicorn response body cleanly while its thread goes on: the last chunk, then
    the end of the connection's sending side (:func:`_close_after` came first).

    Raises:
        OSError: the connection failed.
    """
    response = _gunicorn_response(write)
    if response.chunked:
        response.sock.sendall(b"0\r\n\r\n")
        # gunicorn writes the last chunk when the application returns: it must not write it twice.
        response.chunked = False
    with contextlib.suppress(OSError):
        response.sock.shutdown(socket.SHUT_WR)


class DirectResponse:
    """The WSGI response of a :class:`DirectSink`: runs its job on this thread, then answers."""

    def __init__(self, sink: DirectSink, status_of: Callable[[dict[str, Any]], int], headers: dict[str, Any] | None):
        self._sink = sink
        self._status_of = status_of
        self._headers = headers or {}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        sink = self._sink
        sink.bind(start_response)
        job = sink.job
        assert job is not None  # set before the response is returned
        try:
            job()
        finally:
            # Late sends of threads the handler left behind are dropped from here on.
            sink.close()
        final = sink.final
        if sink.started:
            data = sink.last_event()
            return [data] if data is not None else []
        if final is None:
            # A request cancelled before it sent anything ends without a response.
            start_response("200 OK", [("Content-Type", "text/event-stream"), *SSE_HEADERS.items()])
            return []
        body = encode(final)
        status = self._status_of(final)
        start_response(
            f"{status} {HTTP_STATUS_CODES.get(status, '')}".rstrip(),
            [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *self._headers.items()],
        )
        return [body]
