"""HTTP responses of the Streamable HTTP transport: JSON bodies and SSE streams (MCP basic/transports).

A request is answered either with one ``application/json`` body or with a
``text/event-stream`` whose events carry the messages related to the request and then its
response. :func:`reply` makes that choice late, from a :class:`zemcp.replies.sinks.ReplySink`: plain
JSON when the handler finished without sending anything first, else a stream (the in-place
upgrade). :func:`new_sink` picks the sink of a request (the HTTP transport's, for either era); no
protocol decisions here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from werkzeug.wrappers import Response

from zemcp.protocol import jsonrpc
from zemcp.replies.direct import DirectResponse, DirectSink
from zemcp.replies.encoding import encode
from zemcp.replies.resumable import ResumableReplySink
from zemcp.replies.sinks import ReplySink
from zemcp.replies.streams import SSE_HEADERS, LogStream, SinkStream

if TYPE_CHECKING:
    from zemcp.auth.principal import Challenge
    from zemcp.protocol.jsonrpc import RequestId
    from zemcp.state.streamlogs import StreamLogs


def empty_response(status: int, headers: dict[str, str] | list[tuple[str, str]] | None = None) -> Response:
    """A response without a body, hence without ``Content-Type`` (202 for an accepted
    notification or answer, 204 for DELETE and preflights)."""
    response = Response(status=status, headers=headers)
    del response.headers["Content-Type"]
    return response


def come_back_later(reason: str, retry_after: float) -> Response:
    """An SSE stream that only tells the client to come back: a comment with ``reason``, the
    ``retry`` field (``retry_after`` seconds, sent in milliseconds), then its end.

    For a GET that may be answered only with an event stream or 405 (MCP basic/transports,
    "Listening for Messages from the Server") when there is no room to keep it open now: the
    client reconnects after ``retry`` and holds no thread meanwhile. It carries no event id, so
    the client comes back with a plain GET, not a resumption.
    """
    comment = " ".join(reason.split())  # one line: a newline would end the SSE comment
    body = f": {comment}\nretry: {max(1, round(retry_after * 1000))}\n\n".encode()
    return event_stream([body], {"Retry-After": str(max(1, round(retry_after)))})


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
        return DirectResponse(sink, status_of, headers)
    streaming, final = sink.first()
    if not streaming and final is not None:
        sink.close()
        return json_response(status_of(final), final, headers)
    body: Iterable[bytes]
    if isinstance(sink, ResumableReplySink) and sink.log is not None:
        body = LogStream(sink.log, sink.token, 0, sink.priming, environ, keepalive)
    else:
        body = SinkStream(sink, environ, keepalive)
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


#: What answers a request: a werkzeug response, or the response of a :class:`DirectSink`.
WSGIResponse: TypeAlias = "Response | DirectResponse"


def new_sink(
    environ: dict[str, Any],
    keepalive: float,
    streams: StreamLogs | None = None,
    send_timeout: float | None = None,
    request_id: RequestId | None = None,
) -> DirectSink | ReplySink:
    """The sink for a request whose handler may talk to the client.

    A :class:`DirectSink` under gunicorn's threaded workers (the handler runs on the request's
    thread); a :class:`zemcp.replies.sinks.ReplySink` elsewhere (the handler runs on zemcp's pool and
    hands its messages to the request's thread), for example under werkzeug's test client.
    With ``streams`` (a handshake-era session's) the stream is resumable either way;
    ``send_timeout`` [seconds] bounds each write to a client that reads nothing (gunicorn only);
    ``request_id`` is the id of the request the stream answers (what a resumable stream's
    last event names if the process running the request dies first).
    """
    if environ.get("gunicorn.socket") is not None and environ.get("wsgi.multithread"):
        return DirectSink(environ, keepalive, streams, send_timeout, request_id)
    return ResumableReplySink(streams, request_id) if streams is not None else ReplySink()
