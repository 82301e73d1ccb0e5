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
import time
from collections.abc import Callable, Iterator

from werkzeug.wrappers import Response

from zemcp import jsonrpc
from zemcp.sinks import KEEPALIVE, ReplySink

log = logging.getLogger("zemcp.transport")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: [seconds] how often a quiet stream looks whether its client is still there, whatever the
#: keep-alive interval: a stream the client left gives its thread (and its slot) back this soon.
PEER_CHECK_INTERVAL = 1.0


def json_response(status: int, message: dict, headers: dict | None = None) -> Response:
    """One JSON-RPC message as an ``application/json`` response."""
    return Response(encode(message), status=status, content_type="application/json", headers=headers)


def error_response(status: int, code: int, message: str, headers: dict | None = None, id: jsonrpc.RequestId | None = None,
                   data: object = None) -> Response:
    """A JSON-RPC error (``id`` None when the request's id is unknown) as an ``application/json`` response."""
    return json_response(status, jsonrpc.error(id, code, message, data), headers)


def reply(sink: ReplySink, environ: dict, keepalive: float, status_of: Callable[[dict], int] = lambda _: 200,
          headers: dict | None = None) -> Response:
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
    """
    streaming, final = sink.first()
    if not streaming and final is not None:
        sink.close()
        return json_response(status_of(final), final, headers)
    return Response(_Stream(sink, environ, keepalive), status=200, content_type="text/event-stream",
                    headers={**SSE_HEADERS, **(headers or {})}, direct_passthrough=True)


class _Stream:
    """The body of an upgraded response: SSE events from a reply sink, keep-alive comments
    between them, and the sink closed when the server closes the body (PEP 3333), also when
    nothing was ever read from it."""

    def __init__(self, sink: ReplySink, environ: dict, keepalive: float):
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
                yield b"event: message\ndata: " + encode(item) + b"\n\n"
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


def encode(message: dict) -> bytes:
    """Encode a response, whose result comes from application code and may hold values JSON
    cannot carry: such a response becomes a -32603 error for the same id.

    Server-to-client messages need no such care: the context checks them before they are
    queued, so the handler that built them gets the error.
    """
    try:
        return jsonrpc.encode(message)
    except (TypeError, ValueError) as exc:
        log.error("cannot encode a response as JSON: %s", exc)
        return jsonrpc.encode(jsonrpc.error(message.get("id"), jsonrpc.INTERNAL_ERROR,
                                            f"Internal error: the result is not valid JSON ({exc}); fix the handler's return value"))
