"""HTTP responses of the Streamable HTTP transport: JSON bodies and SSE streams (MCP basic/transports).

A request is answered either with one ``application/json`` body or with a
``text/event-stream`` whose events carry the messages related to the request and then its
response. :func:`reply` makes that choice late, from a :class:`zemcp.replies.sinks.ReplySink`: plain
JSON when the handler finished without sending anything first, else a stream (the in-place
upgrade). Used by both eras; no protocol decisions here.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response

from zemcp.protocol import jsonrpc
from zemcp.replies.sinks import KEEPALIVE, CloseCallbacks, ReplySink
from zemcp.state.eventlogs import retry_field

if TYPE_CHECKING:
    from wsgiref.types import StartResponse

    from zemcp.auth.principal import Challenge
    from zemcp.state.eventlogs import EventLog, SessionStreams

log = logging.getLogger("zemcp.transport")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: [seconds] how often a quiet stream looks whether its client is still there, whatever the
#: keep-alive interval: a stream the client left gives its thread (and its slot) back this soon.
PEER_CHECK_INTERVAL = 1.0
#: [seconds] how long a polling connection (:class:`LogStream` ``once``) waits for more events.
ONCE_TICK = 0.05


def json_response(status: int, message: dict[str, Any], headers: dict[str, Any] | None = None) -> Response:
    """One JSON-RPC message as an ``application/json`` response."""
    return Response(encode(message), status=status, content_type="application/json", headers=headers)


def error_response(
    status: int, code: int, message: str, headers: dict[str, Any] | None = None, id: jsonrpc.RequestId | None = None
) -> Response:
    """A JSON-RPC error (``id`` None when the request's id is unknown) as an ``application/json`` response."""
    return json_response(status, jsonrpc.error(id, code, message), headers)


def challenge_response(challenge: Challenge, id: jsonrpc.RequestId | None = None) -> Response:
    """An authorization refusal (401, 400 or 403) with its ``WWW-Authenticate`` challenge (MCP basic/authorization)."""
    return error_response(
        challenge.status,
        jsonrpc.INVALID_REQUEST,
        challenge.message,
        id=id,
        headers={"WWW-Authenticate": challenge.header},
    )


def reply(
    sink: ReplySink | DirectSink,
    environ: dict[str, Any],
    keepalive: float,
    status_of: Callable[[dict[str, Any]], int] = lambda _: 200,
    headers: dict[str, Any] | None = None,
) -> WSGIResponse:
    """The response to a request whose handler writes to ``sink``: JSON or an SSE stream.

    Args:
        sink: the request's reply sink (the handler runs on another thread).
        environ: the WSGI environ (its ``gunicorn.socket`` lets the stream notice a client that left).
        keepalive: [seconds] between SSE comments while the stream waits.
        status_of: the HTTP status of a plain JSON response, from the response message.
        headers: extra headers of either form.
    Returns:
        ``application/json`` when the handler finished without sending anything first, else
        ``text/event-stream``; a request cancelled before it sent anything gets an empty stream.
        For a :class:`DirectSink` the decision is made while its job runs on this thread.
    """
    if isinstance(sink, DirectSink):
        return _DirectResponse(sink, status_of, headers)
    streaming, final = sink.first()
    if not streaming and final is not None:
        sink.close()
        return json_response(status_of(final), final, headers)
    body: Iterable[bytes]
    if isinstance(sink, ResumableReplySink) and sink.log is not None:
        body = LogStream(sink.log, sink.token, 0, sink.priming, environ, keepalive)
    else:
        body = _Stream(sink, environ, keepalive)
    return event_stream(body, headers)


def event_stream(body: Iterable[bytes], headers: dict[str, Any] | None = None) -> Response:
    """A ``text/event-stream`` response with ``body`` (SSE bytes), never buffered by proxies."""
    return Response(
        body,
        status=200,
        content_type="text/event-stream",
        headers={**SSE_HEADERS, **(headers or {})},
        direct_passthrough=True,
    )


class _Stream:
    """The body of an upgraded response: SSE events from a reply sink, keep-alive comments
    between them, and the sink closed when the server closes the body (PEP 3333), also when
    nothing was ever read from it."""

    def __init__(self, sink: ReplySink, environ: dict[str, Any], keepalive: float):
        self._sink = sink
        self._keepalive = keepalive
        # gunicorn hands us the client socket; peeking at it finds a client that left
        # before the next keep-alive write would (a write to a closed peer succeeds once).
        self._client = environ.get("gunicorn.socket")

    def __iter__(self) -> Iterator[bytes]:
        # Without the socket to peek at, only a failing write tells: tick at the keep-alive rate.
        tick = min(PEER_CHECK_INTERVAL, self._keepalive) if self._client is not None else self._keepalive
        last_write = time.monotonic()
        for item in self._sink.frames(tick):
            if item is KEEPALIVE:
                if self._client is not None and _peer_closed(self._client):
                    return
                if time.monotonic() - last_write < self._keepalive:
                    continue
                yield b": keep-alive\n\n"
            else:
                yield b"event: message\ndata: " + encode(cast("dict[str, Any]", item)) + b"\n\n"
            last_write = time.monotonic()

    def close(self) -> None:
        self._sink.close()


class LogStream:
    """The body of a connection that reads a resumable stream (:class:`zemcp.state.eventlogs.EventLog`):
    ``first`` (a priming event or a ``retry`` field), the events after ``after``, then the
    live ones with keep-alive comments between them. It ends with the stream, when another
    connection takes the stream over, when the client left, or after the stream's
    ``poll_interval`` (with a ``retry`` field: SSE polling). Closing it (PEP 3333) detaches
    the connection: the stream waits for the next one.

    Args:
        log: the stream.
        token: this connection's token from ``log.attach()``.
        after: the number of the last event the client has.
        first: bytes written before the events.
        environ: the WSGI environ (its ``gunicorn.socket`` is peeked at).
        keepalive: [seconds] between keep-alive comments.
        on_close: called once when the body is closed (a thread slot given back).
        send_timeout: [seconds] under gunicorn, the longest a write may wait for a client that
            reads nothing; the connection then ends.
        once: deliver what the stream holds now, then end the connection with a ``retry``
            field (a poll, for a connection that holds no place of the thread budget).
    """

    def __init__(
        self,
        log: EventLog,
        token: int,
        after: int,
        first: bytes,
        environ: dict[str, Any],
        keepalive: float,
        on_close: Callable[[], object] | None = None,
        send_timeout: float | None = None,
        once: bool = False,
    ):
        self._log = log
        self._token = token
        self._after = after
        self._first = first
        self._keepalive = keepalive
        self._client = environ.get("gunicorn.socket")
        self._on_close = on_close
        self._send_timeout = send_timeout
        self._once = once

    def __iter__(self) -> Iterator[bytes]:
        log = self._log
        client = self._client
        if self._once:
            tick = ONCE_TICK
        else:
            tick = min(PEER_CHECK_INTERVAL, self._keepalive) if client is not None else self._keepalive
        if client is not None and self._send_timeout is not None:
            # A client that stops reading must not hold this thread for ever.
            client.settimeout(self._send_timeout)
        poll = log.limits.poll_interval
        opened = last_write = time.monotonic()
        yield self._first
        # A poll ends once it delivered what the stream held, however busy the stream is.
        limit = ONCE_TICK if self._once else poll
        for item in log.read(self._token, self._after, tick):
            now = time.monotonic()
            if item is KEEPALIVE:
                if limit and now - opened >= limit:
                    yield retry_field(log.limits)
                    return
                if client is not None and _peer_closed(client):
                    return
                if now - last_write < self._keepalive:
                    continue
                yield b": keep-alive\n\n"
            else:
                if client is not None and not _writable(client, self._send_timeout):
                    # Cut the connection: gunicorn's last chunk must not wait for this client too.
                    with contextlib.suppress(OSError):
                        client.shutdown(socket.SHUT_RDWR)
                    return
                yield cast(bytes, item)
                if limit and time.monotonic() - opened >= limit:
                    yield retry_field(log.limits)
                    return
            last_write = now

    def close(self) -> None:
        """The server is done with the body (PEP 3333): the connection no longer reads the stream."""
        self._log.detach(self._token)
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


class ResumableReplySink(ReplySink):
    """A :class:`zemcp.replies.sinks.ReplySink` whose stream is resumable (handshake era, a handler on
    zemcp's pool): its events go to an :class:`zemcp.state.eventlogs.EventLog` of the session, which
    the request's response reads (:class:`LogStream`) and a resuming GET can read after it.

    Args:
        streams: the session's streams.
    """

    def __init__(self, streams: SessionStreams):
        super().__init__()
        self.streams = streams
        self.log: EventLog | None = None
        self.token = 0
        self.priming = b""

    def _open(self) -> EventLog:
        # Called with the condition held: the stream starts with its priming event.
        if self.log is None:
            self.log = self.streams.open()
            self.token = self.log.attach()
            self.priming = self.log.prime()
            self._streaming = True
            self._cond.notify_all()
        return self.log

    def send(self, message: dict[str, Any]) -> bool:
        """Add a message that precedes the response to the stream (upgrades the response).

        Returns:
            False when the request finished or its client was gone past the resumption window.
        """
        with self._cond:
            if self._closed or self._finished:
                return False
            log = self._open()
            give_up = log.abandoned()
            if not give_up:
                log.append(encode(message))
        if give_up:
            self.close()
            return False
        return True

    def finish(self, response: dict[str, Any] | None) -> None:
        """Give the final response (``None``: cancelled); it ends the stream when there is one."""
        with self._cond:
            if self._finished:
                return
            self._finished = True
            self._final = response
            if self.log is not None:
                self.log.finish(encode(response) if response is not None else None)
                self.streams.ended(self.log)
            self._cond.notify_all()

    def end_stream(self) -> None:
        """End the client's current connection with a ``retry`` field (SSE polling); the
        handler goes on and the client resumes with ``Last-Event-ID``."""
        with self._cond:
            if self._closed or self._finished:
                return
            log = self._open()
        log.end_connection()

    def tick(self) -> None:
        """While the handler waits: give up on a client gone longer than the resumption window."""
        log = self.log
        if log is not None and log.abandoned():
            self.close()


def _writable(sock: socket.socket, timeout: float | None) -> bool:
    """True when ``sock`` can take bytes within ``timeout`` seconds (None: wait as long as it takes)."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLOUT)
        return bool(poller.poll(None if timeout is None else timeout * 1000))
    except (ValueError, OSError):
        return True  # the write itself will tell


def _peer_closed(sock: socket.socket) -> bool:
    # poll(), unlike select(), takes descriptors above 1024.
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ValueError:
        return False  # a TLS socket cannot peek: the next keep-alive write will tell
    except OSError:
        return True


def encode(message: dict[str, Any]) -> bytes:
    """Encode a response, whose result comes from application code and may hold values JSON
    cannot carry: such a response becomes a -32603 error for the same id.

    Server-to-client messages need no such care: the context checks them before they are
    queued, so the handler that built them gets the error.
    """
    try:
        return jsonrpc.encode(message)
    except (TypeError, ValueError) as exc:
        log.error("cannot encode a response as JSON: %s", exc)
        return jsonrpc.encode(
            jsonrpc.error(
                message.get("id"),
                jsonrpc.INTERNAL_ERROR,
                f"Internal error: the result is not valid JSON ({exc}); fix the handler's return value",
            )
        )


class DirectSink(CloseCallbacks):
    """A reply sink that writes straight to the client from the handler's own thread.

    Under gunicorn (the WSGI environ carries ``gunicorn.socket``, ``wsgi.multithread`` is true)
    the handler runs on the request's thread itself: PEP 3333 lets an application call
    ``start_response`` late and write through the ``write`` callable it returns. So the first
    message a handler sends commits ``text/event-stream`` and is written at once; a handler that
    finishes without sending anything is answered ``application/json``. A pending elicitation
    then costs one thread, not two, and a plain call needs no hand-over between threads.

    With ``streams`` (a handshake-era session's) the stream is resumable: it starts with a
    priming event, every event has an id and is kept in an :class:`zemcp.state.eventlogs.EventLog`,
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
    """

    direct = True

    def __init__(
        self,
        environ: dict[str, Any],
        keepalive: float,
        streams: SessionStreams | None = None,
        send_timeout: float | None = None,
    ):
        super().__init__()
        self._client = environ["gunicorn.socket"]
        self._keepalive = keepalive
        #: [seconds] how often a waiting handler calls :meth:`tick`.
        self.tick_interval = min(PEER_CHECK_INTERVAL, keepalive)
        self._lock = threading.Lock()
        self._write: Callable[[bytes], object] | None = None
        self._start_response: StartResponse | None = None
        self._last_write = 0.0
        self._opened = 0.0
        self.started = False
        self._finished = False
        self.final: dict[str, Any] | None = None
        #: The handler's job, run by :class:`_DirectResponse` on the request's thread.
        self.job: Callable[[], None] | None = None
        self.streams = streams
        self._send_timeout = send_timeout
        #: The stream's events, once it started (resumable streams only).
        self.log: EventLog | None = None
        self._token = 0

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
            if self.log is not None and self.log.abandoned():
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
            self._start_stream()
        except OSError:
            self._lost()
        log = self.log
        if log is None:
            try:
                self._emit(b"event: message\ndata: " + payload + b"\n\n")
            except OSError:
                return False
            self._last_write = time.monotonic()
            return True
        data = log.append(payload)
        if data is not None and log.reads(self._token):
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
            if log is not None and not log.reads(self._token):
                # Another connection reads the stream, or none: only the window is left to watch.
                give_up = log.abandoned(now)
            elif _peer_closed(self._client):
                gone = True
            else:
                poll = log.limits.poll_interval if log is not None else 0.0
                if poll and now - self._opened >= poll:
                    self._end_own()
                elif now - self._last_write >= self._keepalive:
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
        data = log.finish(encode(final) if final is not None else None)
        assert self.streams is not None  # a log belongs to a session's streams
        self.streams.ended(log)
        return data if log.reads(self._token) else None

    @property
    def finished(self) -> bool:
        """True once the final response (or its absence) was given."""
        return self._finished

    def _start_stream(self) -> None:
        # Called with the lock held.
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
        self.log = self.streams.open()
        self._token = self.log.attach()
        # The connection may be ended on purpose: the client must not send its next request on it.
        _close_after(self._write)
        self._emit(self.log.prime())
        self._last_write = time.monotonic()

    def _end_own(self) -> None:
        # Called with the lock held: end this request's own connection, the stream lives on.
        log = self.log
        assert log is not None and self._write is not None
        try:
            ended = _gunicorn_response(self._write) is not None
            if ended:
                self._emit(retry_field(log.limits))
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


def _gunicorn_response(write: Callable[[bytes], object]) -> Any:
    # gunicorn's ``write`` callable is a method of its Response, which owns the framing.
    response = getattr(write, "__self__", None)
    return response if hasattr(response, "sock") and hasattr(response, "chunked") else None


def _close_after(write: Callable[[bytes], object]) -> None:
    """Before the headers go out: make gunicorn send ``Connection: close`` and close the
    connection after this response, so that a stream ended early by :func:`_end_body`
    never has a next request sent on its connection."""
    response = _gunicorn_response(write)
    if response is not None and hasattr(response, "force_close"):
        response.force_close()


def _end_body(write: Callable[[bytes], object]) -> None:
    """End a gunicorn response body cleanly while its thread goes on: the last chunk, then
    the end of the connection's sending side (the response was sent ``Connection: close``).

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


class _DirectResponse:
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


#: What answers a request: a werkzeug response, or the response of a :class:`DirectSink`.
WSGIResponse: TypeAlias = "Response | _DirectResponse"


def new_sink(
    environ: dict[str, Any],
    keepalive: float,
    streams: SessionStreams | None = None,
    send_timeout: float | None = None,
) -> DirectSink | ReplySink:
    """The sink for a request whose handler may talk to the client.

    A :class:`DirectSink` under gunicorn's threaded workers (the handler runs on the request's
    thread); a :class:`zemcp.replies.sinks.ReplySink` elsewhere (the handler runs on zemcp's pool and
    hands its messages to the request's thread), for example under werkzeug's test client.
    With ``streams`` (a handshake-era session's) the stream is resumable either way;
    ``send_timeout`` [seconds] bounds each write to a client that reads nothing (gunicorn only).
    """
    if environ.get("gunicorn.socket") is not None and environ.get("wsgi.multithread"):
        return DirectSink(environ, keepalive, streams, send_timeout)
    return ResumableReplySink(streams) if streams is not None else ReplySink()
