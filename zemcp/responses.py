"""HTTP responses of the Streamable HTTP transport: JSON bodies and SSE streams (MCP basic/transports).

A request is answered either with one ``application/json`` body or with a
``text/event-stream`` whose events carry the messages related to the request and then its
response. :func:`reply` makes that choice late, from a :class:`zemcp.sinks.ReplySink`: plain
JSON when the handler finished without sending anything first, else a stream (the in-place
upgrade). Used by both eras; no protocol decisions here.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response

from zemcp import jsonrpc
from zemcp.sinks import KEEPALIVE, CloseCallbacks, ReplySink

if TYPE_CHECKING:
    from wsgiref.types import StartResponse

    from zemcp.auth import Challenge

log = logging.getLogger("zemcp.transport")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: [seconds] how often a quiet stream looks whether its client is still there, whatever the
#: keep-alive interval: a stream the client left gives its thread (and its slot) back this soon.
PEER_CHECK_INTERVAL = 1.0


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
    return Response(
        _Stream(sink, environ, keepalive),
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

    The same interface as :class:`zemcp.sinks.ReplySink` (``send``, ``finish``, ``on_close``,
    ``close``, ``finished``), plus :meth:`tick`, which a waiting handler calls about every
    second to write keep-alive comments and to notice a client that left.

    Args:
        environ: the request's WSGI environ (its ``gunicorn.socket`` is peeked at).
        keepalive: [seconds] between keep-alive comments while the stream waits.
    """

    direct = True

    def __init__(self, environ: dict[str, Any], keepalive: float):
        super().__init__()
        self._client = environ["gunicorn.socket"]
        self._keepalive = keepalive
        #: [seconds] how often a waiting handler calls :meth:`tick`.
        self.tick_interval = min(PEER_CHECK_INTERVAL, keepalive)
        self._lock = threading.Lock()
        self._write: Callable[[bytes], object] | None = None
        self._start_response: StartResponse | None = None
        self._last_write = 0.0
        self.started = False
        self._finished = False
        self.final: dict[str, Any] | None = None
        #: The handler's job, run by :class:`_DirectResponse` on the request's thread.
        self.job: Callable[[], None] | None = None

    def bind(self, start_response: StartResponse) -> None:
        """Take the WSGI ``start_response`` of the request (before the job runs)."""
        self._start_response = start_response

    def send(self, message: dict[str, Any]) -> bool:
        """Write a message that precedes the response; the first one starts the stream.

        Returns:
            False when the client is gone or the request already finished (dropped), else True.
        """
        with self._lock:
            if self._closed or self._finished:
                return False
            try:
                self._start_stream()
                self._emit(b"event: message\ndata: " + encode(message) + b"\n\n")
            except OSError:
                gone = True
            else:
                gone = False
                self._last_write = time.monotonic()
        if gone:
            self.close()
            return False
        return True

    def tick(self) -> None:
        """While the handler waits: notice a client that left, write a keep-alive when due."""
        with self._lock:
            if not self.started or self._closed or self._finished:
                return
            gone = _peer_closed(self._client)
            if not gone and time.monotonic() - self._last_write >= self._keepalive:
                try:
                    self._emit(b": keep-alive\n\n")
                    self._last_write = time.monotonic()
                except OSError:
                    gone = True
        if gone:
            self.close()

    def finish(self, response: dict[str, Any] | None) -> None:
        """Give the final response (``None``: the request was cancelled, send no response)."""
        with self._lock:
            if not self._finished:
                self._finished = True
                self.final = response

    @property
    def finished(self) -> bool:
        """True once the final response (or its absence) was given."""
        return self._finished

    def _start_stream(self) -> None:
        # Called with the lock held.
        if not self.started:
            start_response = self._start_response
            assert start_response is not None  # bound before the job runs
            self._write = start_response("200 OK", [("Content-Type", "text/event-stream"), *SSE_HEADERS.items()])
            self.started = True

    def _emit(self, data: bytes) -> None:
        # Called with the lock held, once the stream has started.
        write = self._write
        assert write is not None  # _start_stream set it
        write(data)


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
            return [b"event: message\ndata: " + encode(final) + b"\n\n"] if final is not None else []
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


def new_sink(environ: dict[str, Any], keepalive: float) -> DirectSink | ReplySink:
    """The sink for a request whose handler may talk to the client.

    A :class:`DirectSink` under gunicorn's threaded workers (the handler runs on the request's
    thread); a :class:`zemcp.sinks.ReplySink` elsewhere (the handler runs on zemcp's pool and
    hands its messages to the request's thread), for example under werkzeug's test client.
    """
    if environ.get("gunicorn.socket") is not None and environ.get("wsgi.multithread"):
        return DirectSink(environ, keepalive)
    return ReplySink()
