"""The Streamable HTTP transport as a WSGI application (MCP 2025-06-18 basic/transports).

One endpoint (``/mcp`` by default): POST carries one JSON-RPC message, DELETE ends a
session, everything else gets 405. This layer only speaks HTTP; what a message means is
decided by :class:`zemcp.server.Server`. The ``docs/transport.md`` table lists every status
code this module produces.

The in-place upgrade: a tools/call is answered ``application/json`` when its handler returns
without sending anything first; when the handler elicits, the response becomes
``text/event-stream`` and its body is a generator that writes each message as an SSE event,
an SSE comment every ``keepalive_interval`` seconds while it waits, and the final response
last.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from zemcp import jsonrpc
from zemcp.config import Settings, is_loopback_host
from zemcp.jsonrpc import INVALID_REQUEST, ProtocolError
from zemcp.server import AlreadyInitialized, Server
from zemcp.session import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.sinks import KEEPALIVE, ReplySink

log = logging.getLogger("zemcp.transport")

ALLOW = "POST, DELETE"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
#: [seconds] ``Retry-After`` sent with 429 when the session cap is reached.
RETRY_AFTER = 30
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class McpApp:
    """WSGI application serving one :class:`Server` over Streamable HTTP.

    Mount it as the whole app (gunicorn ``wsgi:app``) or under a prefix of an existing WSGI
    stack (for example werkzeug's ``DispatcherMiddleware`` with ``endpoint="/"``).

    Args:
        server: the MCP server core.
        endpoint: URL path of the endpoint; ``server.settings.endpoint`` when omitted.
    """

    def __init__(self, server: Server, endpoint: str | None = None):
        self.server = server
        self.settings: Settings = server.settings
        self.endpoint = (endpoint or self.settings.endpoint).rstrip("/")
        # Decided once: parsing the bind address on every request would be wasted work.
        self._check_host = self.settings.bind_is_loopback

    def __call__(self, environ: dict, start_response) -> Iterable[bytes]:
        """The WSGI entry point (PEP 3333): answer one HTTP request."""
        try:
            response = self.dispatch(Request(environ))
        except HTTPException as exc:  # werkzeug's own refusals (bad headers and the like)
            response = _error(exc.code or 400, INVALID_REQUEST, f"{exc.name}: {exc.description}")
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        """Answer one HTTP request; the checks run in the order of ``docs/transport.md``."""
        refusal = self._check_origin_and_host(request)
        if refusal is not None:
            return refusal
        if request.path.rstrip("/") != self.endpoint:
            return _error(404, INVALID_REQUEST, f"Not Found: the MCP endpoint is {request.script_root + self.endpoint or '/'}")
        if request.method == "POST":
            return self._post(request)
        if request.method == "DELETE":
            return self._delete(request)
        why = (
            "this server offers no standalone SSE stream; messages for a request arrive on that request's POST response"
            if request.method == "GET" else f"{request.method} is not supported"
        )
        return _error(405, INVALID_REQUEST, f"Method Not Allowed: {why}; use POST (and DELETE to end a session)",
                      headers={"Allow": ALLOW})

    def _check_origin_and_host(self, request: Request) -> Response | None:
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin):
            log.warning("refused Origin %r", origin)
            return _error(403, INVALID_REQUEST, f"Forbidden: Origin {origin!r} is not allowed; add it to ZEMCP_ALLOWED_ORIGINS")
        host = request.headers.get("Host")
        if host is not None and self._check_host and not is_loopback_host(_hostname(host)):
            log.warning("refused Host %r on a loopback bind", host)
            return _error(403, INVALID_REQUEST, f"Forbidden: Host {host!r} is not a loopback name; this server is bound to loopback")
        return None

    def _origin_allowed(self, origin: str) -> bool:
        normalized = origin.rstrip("/").lower()
        if normalized in self.settings.allowed_origins:
            return True
        parts = urlsplit(normalized)
        return parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback_host(parts.hostname)

    def _post(self, request: Request) -> Response:
        if request.mimetype != "application/json":
            got = repr(request.mimetype) if request.mimetype else "none"
            return _error(415, INVALID_REQUEST, f"Unsupported Media Type: Content-Type must be application/json, got {got}")
        accept = request.accept_mimetypes
        if not request.headers.get("Accept") or not (accept["application/json"] and accept["text/event-stream"]):
            return _error(406, INVALID_REQUEST,
                          "Not Acceptable: the Accept header must list both application/json and text/event-stream")
        try:
            body = self._read_body(request)
        except TimeoutError:
            client = request.environ.get("gunicorn.socket")
            if client is not None:
                # Stop reading from the stalled client, so gunicorn does not wait to drain
                # the rest of its body before freeing this thread.
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RD)
            return _error(408, INVALID_REQUEST,
                          f"Request Timeout: the body stalled for over {self.settings.body_timeout:g} s (ZEMCP_BODY_TIMEOUT)")
        if body is None:
            return _error(413, INVALID_REQUEST,
                          f"Payload Too Large: the body exceeds {self.settings.max_body_bytes} bytes (ZEMCP_MAX_BODY_BYTES)")
        try:
            message = jsonrpc.parse(body)
        except ProtocolError as exc:
            return _json(400, exc.to_message())
        # Only a request's id is echoed: a response's id is the server's own request id.
        request_id = message.id if isinstance(message, jsonrpc.Request) else None
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None and "," in session_id:
            # Repeated headers arrive joined with commas; a session id never contains one.
            return _json(400, jsonrpc.error(request_id, INVALID_REQUEST,
                                            "Bad Request: send the Mcp-Session-Id header once, with one session id"))

        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            return self._initialize(message, session_id)
        try:
            self.server.check_protocol_header(request.headers.get(VERSION_HEADER))
            session = self.server.sessions.get(session_id)
        except ProtocolError as exc:
            return _json(400, jsonrpc.error(request_id, exc.code, exc.message))
        except SessionRequired as exc:
            return _json(400, jsonrpc.error(request_id, INVALID_REQUEST, str(exc)))
        except SessionNotFound as exc:
            return _json(404, jsonrpc.error(request_id, INVALID_REQUEST, str(exc)))

        try:
            outcome = self.server.handle(session, message)
        except SessionNotFound as exc:
            return _json(404, jsonrpc.error(request_id, INVALID_REQUEST, str(exc)))
        if outcome is None:
            return Response(status=202)
        if isinstance(outcome, dict):
            return _json(200, outcome)
        streaming, final = outcome.first()
        if not streaming and final is not None:
            outcome.close()
            return _json(200, final)
        # A stream; also for a request cancelled before it sent anything: it ends without a response.
        return Response(_Stream(outcome, request.environ, self.settings.keepalive_interval), status=200,
                        content_type="text/event-stream", headers=SSE_HEADERS, direct_passthrough=True)

    def _initialize(self, message: jsonrpc.Request, session_id: str | None) -> Response:
        try:
            session, response = self.server.initialize(message, session_id)
        except AlreadyInitialized as exc:
            return _json(400, jsonrpc.error(message.id, INVALID_REQUEST, str(exc)))
        except ProtocolError as exc:
            return _json(400, jsonrpc.error(message.id, exc.code, exc.message))
        except SessionLimitReached as exc:
            return _json(429, jsonrpc.error(message.id, INVALID_REQUEST, f"Too Many Requests: {exc}"),
                         headers={"Retry-After": str(RETRY_AFTER)})
        return _json(200, response, headers={SESSION_HEADER: session.id})

    def _delete(self, request: Request) -> Response:
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            return _error(400, INVALID_REQUEST, "Bad Request: DELETE needs the Mcp-Session-Id header of the session to end")
        try:
            self.server.check_protocol_header(request.headers.get(VERSION_HEADER))
        except ProtocolError as exc:
            return _error(400, exc.code, exc.message)
        if not self.server.end_session(session_id):
            return _error(404, INVALID_REQUEST, "Session not found: it already ended or was never created here")
        return Response(status=204)

    def _read_body(self, request: Request) -> bytes | None:
        """The whole body, or None when it is over the limit (chunked bodies included).

        Raises:
            TimeoutError: under gunicorn, the client sent nothing for ``body_timeout`` seconds.
        """
        limit = self.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return None
        # A client that stalls mid-body would hold this thread for good; bound each wait.
        client = request.environ.get("gunicorn.socket")
        if client is not None:
            client.settimeout(self.settings.body_timeout)
        try:
            stream = request.stream
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = stream.read(min(65536, limit + 1 - total))
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    return None
        finally:
            if client is not None:
                client.settimeout(None)


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
        for item in self._sink.frames(self._keepalive):
            if item is KEEPALIVE:
                if self._client is not None and _peer_closed(self._client):
                    return
                yield b": keep-alive\n\n"
            else:
                yield b"event: message\ndata: " + _encode(item) + b"\n\n"

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


def _encode(message: dict) -> bytes:
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


def _hostname(host: str) -> str:
    return urlsplit("//" + host).hostname or ""


def _json(status: int, message: dict, headers: dict | None = None) -> Response:
    return Response(_encode(message), status=status, content_type="application/json", headers=headers)


def _error(status: int, code: int, message: str, headers: dict | None = None) -> Response:
    return _json(status, jsonrpc.error(None, code, message), headers)
