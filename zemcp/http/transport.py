"""The Streamable HTTP transport as a WSGI application (MCP basic/transports), for both eras.

One endpoint (``/mcp`` by default): POST carries one JSON-RPC message, GET reads a
handshake-era session's SSE stream (resuming one with ``Last-Event-ID``), DELETE ends a
session, everything else gets 405. This layer checks what every request must
pass (Origin, Host, path, method, Content-Type, Accept, body size and pace, JSON-RPC
syntax), then decides the protocol era once, by MCP 2026-07-28 basic/versioning's dual-era
rule (:func:`zemcp.protocol.envelope.selects_modern`), builds the message's
:class:`zemcp.eras.requestcontext.RequestContext` (for a session's message, with the session its
``Mcp-Session-Id`` names) and hands both to that era's pipeline (:mod:`zemcp.pipeline`: rate
limits, telemetry, audit, authorization, admission), around :mod:`zemcp.eras.modern.era`
(stateless 2026-07-28) or :mod:`zemcp.eras.handshake.era` (``initialize`` and sessions). The
outcome becomes the HTTP response in :mod:`zemcp.http.outcomes`; the ``docs/transport.md``
table lists every status code.

The in-place upgrade (:func:`zemcp.replies.responses.reply`): a request is answered
``application/json`` when its handler returns without sending anything first; when the
handler sends a message first, the response becomes ``text/event-stream``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from werkzeug.exceptions import ClientDisconnected, HTTPException
from werkzeug.http import parse_options_header
from werkzeug.sansio.utils import get_content_length
from werkzeug.wrappers import Request, Response

from zemcp import logsafe
from zemcp.auth.principal import Challenge, Principal, VerifierUnavailable, site_principal
from zemcp.config import Settings, is_loopback_host
from zemcp.core.server import Server
from zemcp.eras.handshake.era import HandshakeEra
from zemcp.eras.modern.era import ModernEra
from zemcp.eras.requestcontext import TCP, RequestContext
from zemcp.http import cors, outcomes
from zemcp.http.forwarded import ClientAddresses, trusted_networks
from zemcp.http.outcomes import refused
from zemcp.http.sessions import SESSION_HEADER, VERSION_KEY, SessionEndpoints, check_protocol_header, session_header
from zemcp.http.wsgirequest import WsgiRequest, endpoint_path
from zemcp.pipeline import compose
from zemcp.protocol import jsonrpc
from zemcp.protocol.envelope import selects_modern
from zemcp.protocol.jsonrpc import INVALID_REQUEST, ProtocolError
from zemcp.replies.responses import (
    WSGIResponse,
    challenge_response,
    empty_response,
    error_response,
    json_response,
    new_sink,
)
from zemcp.state import shares
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from wsgiref.types import StartResponse

    from zemcp.protocol.jsonrpc import RequestId
    from zemcp.replies.direct import DirectSink
    from zemcp.replies.sinks import ReplySink
    from zemcp.state.streamlogs import StreamLogs

log = logging.getLogger("zemcp.transport")

ALLOW = "GET, POST, DELETE, OPTIONS"
#: [seconds] how long a cache may keep the Protected Resource Metadata document.
METADATA_MAX_AGE = 300
#: Distinct ``Accept`` or ``Host`` values whose verdict is remembered (one or two in practice).
VERDICT_CACHE_SIZE = 64
#: How to serve a proxy that forwards the client's ``Host`` (docs/security.md, docs/deploy.md).
HOST_FIX = (
    "Behind a proxy, have the proxy send a loopback Host (nginx: 'proxy_set_header Host localhost;' rather than "
    "'$host'; HAProxy: 'http-request set-header Host localhost'), or set ZEMCP_BIND to an address only the proxy "
    "can reach, where Host is not checked"
)
#: The environ key :meth:`McpApp._read_body` sets once it has read the whole body.
_BODY_READ = "zemcp.body_read"
#: The trace-context headers (W3C) a message's span takes as its transport's context, by environ key.
_TRACE_KEYS = {"HTTP_TRACEPARENT": "traceparent", "HTTP_TRACESTATE": "tracestate", "HTTP_BAGGAGE": "baggage"}


class RoutedAnswer(NamedTuple):
    """What :meth:`McpApp.answer` gives a framework: ``status`` (an HTTP status code),
    ``headers`` (name, value pairs) and ``body`` (bytes chunks; close it when done)."""

    status: int
    headers: list[tuple[str, str]]
    body: Iterable[bytes]

    @property
    def content_type(self) -> str | None:
        """The ``Content-Type`` header's value, or None (a 202, a preflight's 204)."""
        return next((value for name, value in self.headers if name.lower() == "content-type"), None)

    @property
    def streams(self) -> bool:
        """Whether the body is an event stream, to send as it is made (never buffered)."""
        return self.content_type == "text/event-stream"

    def content(self) -> bytes:
        """The whole body of an answer that is not a stream, read and closed (PEP 3333)."""
        try:
            return b"".join(self.body)
        finally:
            close = getattr(self.body, "close", None)
            if callable(close):
                close()


def _no_write(data: bytes) -> None:
    raise RuntimeError("zemcp answers through the framework's response; nothing is written directly")


class McpApp:
    """WSGI application serving one :class:`Server` over Streamable HTTP.

    Mount it as the whole app (gunicorn ``wsgi:app``) or under a prefix of an existing WSGI
    stack (for example werkzeug's ``DispatcherMiddleware`` with ``endpoint="/"``).

    Args:
        server: the MCP server core.
        endpoint: URL path of the endpoint; ``server.settings.endpoint`` when omitted.
        guarded: every request reaches it through a framework's authentication that requires
            a user (``zemcp.django.view(authentication=...)``, the Flask extension's
            ``login_required``): no warning that a non-loopback bind without zemcp's
            authorization is open to anyone.
    Raises:
        ValueError: the server's MCP Apps declarations do not hold together
            (:meth:`zemcp.Server.check_apps`: a ``ui_resource=`` without its resource);
            checked again at each request until it holds, for registrations made after this
            (such a request is answered 500 with the error, which is logged).
    """

    def __init__(self, server: Server, endpoint: str | None = None, *, guarded: bool = False):
        self.server = server
        self.settings: Settings = server.settings
        self.endpoint = (endpoint or self.settings.endpoint).rstrip("/")
        # Decided once: parsing the bind address on every request would be wasted work.
        self._check_host = self.settings.bind_is_loopback
        server.check_apps()
        self.handshake = HandshakeEra(server)
        self.modern = ModernEra(server)
        # Each era inside the layers every message meets (zemcp.pipeline), built once.
        self._serve_handshake = compose(server, self.handshake.serve)
        self._serve_modern = compose(server, self.modern.serve)
        self.sessions = SessionEndpoints(server, self.handshake)
        self._threading_checked = False
        self._apps_checked = False
        # Clients send the same Host and Accept on every request: each distinct value is judged once.
        self._accept_cache: dict[str, bool] = {}
        self._host_cache: dict[str, bool] = {}
        self._origin_cache: dict[str, bool] = {}
        self._content_type_cache: dict[str, bool] = {}
        self._paths: dict[str, str] = {}
        self.auth = server.auth
        self._addresses = ClientAddresses(trusted_networks(self.settings.forwarded_allow_ips))
        self._metrics_path = self.settings.metrics_path
        self._metrics_readers = [ipaddress.ip_network(n, strict=False) for n in self.settings.metrics_allow]
        self._warn_if_exposed(guarded)

    def _warn_if_exposed(self, guarded: bool) -> None:
        bind = self.settings.bind
        if bind.startswith("unix:") or self.settings.bind_is_loopback:
            return
        if self.auth is None:
            if guarded:
                return
            log.warning(
                "AUTHORIZATION IS OFF and this server binds to %s, which is not a loopback address: anyone who "
                "reaches it can call every tool. Turn authorization on (ZEMCP_AUTH=jwt or introspection, "
                "docs/security.md) or bind to 127.0.0.1",
                bind,
            )
        elif not self.settings.auth_resource and self.auth.resource == self.settings.auth_resource_url:
            log.warning(
                "ZEMCP_AUTH_RESOURCE is not set: tokens must be issued for %s; set it to the URL clients use "
                "(https://host/mcp behind TLS or a proxy)",
                self.auth.resource,
            )

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI entry point (PEP 3333): answer one HTTP request."""
        return self.serve(environ, start_response)

    def serve(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        *,
        routed: bool = False,
        user: Any = None,
        request: Any = None,
        metadata: bool = False,
        unauthorized: tuple[str, str] | None = None,
    ) -> Iterable[bytes]:
        """Answer one HTTP request, as :meth:`__call__` does, for a framework that routed it here.

        Args:
            environ, start_response: as PEP 3333 gives them.
            routed: the framework routed the request to the MCP endpoint (a view of its
                URLconf): the path is not checked, nor the Host (the framework's own check,
                Django's ``ALLOWED_HOSTS``, decided it).
            user: the user the framework's authentication established (``request.user``),
                whom ``permission=`` rules are asked about and a handler's ``ctx.user``; None
                without one.
            request: the framework's request (a handler's ``ctx.request``), or None.
            metadata: the framework routed the request to the Protected Resource Metadata
                (RFC 9728) of zemcp's authorization, not to the endpoint (with ``routed``).
            unauthorized: ``(WWW-Authenticate challenges, message)`` when the framework's
                authentication needs a user and found none: the request is answered 401 so,
                once the Origin check and a CORS preflight have been answered.
        Returns:
            the response's body, as a WSGI application returns it.
        """
        if not self._apps_checked:
            # Again until it holds: an app (a Flask app's) may register tools after building
            # its McpApp, and a broken declaration must not be served.
            try:
                self.server.check_apps()
            except ValueError as exc:
                log.error("not serving: the server's MCP Apps declarations do not hold together: %s", exc)
                refusal = self._refuse(
                    500,
                    jsonrpc.INTERNAL_ERROR,
                    f"Internal Server Error: the server's MCP Apps declarations are broken: {exc}",
                )
                return refusal(environ, start_response)
            self._apps_checked = True
        if not self._threading_checked:
            self._threading_checked = True
            if not environ.get("wsgi.multithread"):
                log.warning(
                    "this WSGI server serves one request at a time per process (wsgi.multithread is false): "
                    "a handshake-era elicitation, sampling or roots request could never receive its answer, so "
                    "it fails at once with CannotWait. Serve zemcp with gunicorn's gthread worker "
                    "(gunicorn -c gunicorn.conf.py); 2026-07-28 clients and plain calls work either way"
                )
        server_start_response = start_response
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and _remembered(self._origin_cache, origin, self._origin_allowed):
            # Every response to an allowed page, streams included, says the page may read it.
            start_response = cors.with_response_headers(start_response, origin)
        try:
            response = self.dispatch(
                WsgiRequest(
                    environ,
                    routed=routed,
                    user=user,
                    site_request=request,
                    metadata=metadata,
                    unauthorized=unauthorized,
                )
            )
        except HTTPException as exc:  # werkzeug's own refusals (bad headers and the like)
            response = self._refuse(exc.code or 400, INVALID_REQUEST, f"{exc.name}: {exc.description}")
        if _body_left_unread(environ):
            # A body over the limit, or one refused before it was read: gunicorn would skip a
            # little of it, then close the connection it announced as kept alive, losing the
            # next request sent on it. Announce the close instead.
            _close_connection(server_start_response)
        return response(environ, start_response)

    def answer(
        self,
        environ: dict[str, Any],
        *,
        user: Any = None,
        request: Any = None,
        metadata: bool = False,
        unauthorized: tuple[str, str] | None = None,
    ) -> RoutedAnswer:
        """Answer a request a framework routed here (:meth:`serve` with ``routed``), for the
        framework to send as its own response object (a Django view's, a Flask route's).

        The answer goes back through the framework's response and middleware, so a handler
        never writes to the client's socket itself here: ``gunicorn.socket`` is left out of
        the environ zemcp sees, and zemcp's handler pool runs the handler.

        Args:
            environ: the request's WSGI environ (a copy is used).
            user, request, metadata, unauthorized: as for :meth:`serve`.
        Returns:
            the status, the headers and the body (an event stream's, iterated as it is sent).
        """
        environ = dict(environ)
        environ.pop("gunicorn.socket", None)
        started: list[tuple[int, list[tuple[str, str]]]] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None, /
        ) -> Callable[[bytes], object]:
            started.append((int(status.split(" ", 1)[0]), headers))
            return _no_write

        body = self.serve(
            environ,
            start_response,
            routed=True,
            user=user,
            request=request,
            metadata=metadata,
            unauthorized=unauthorized,
        )
        status, headers = started[-1]
        return RoutedAnswer(status, headers, body)

    def dispatch(self, request: Request) -> WSGIResponse:
        """Answer one HTTP request; the checks run in the order of ``docs/transport.md``.

        Every refusal is counted where it is made (:func:`zemcp.http.outcomes.refused`).
        """
        routed = isinstance(request, WsgiRequest) and request.routed
        refusal = self._check_origin_and_host(request, check_host=not routed)
        if refusal is not None:
            return refusal
        # Judged once per distinct PATH_INFO, as werkzeug reads it: clients post to one path.
        path = (
            (self.auth.metadata_path if self.auth is not None and request.metadata else self.endpoint)
            if isinstance(request, WsgiRequest) and request.routed
            else _remembered(
                self._paths, request.environ.get("PATH_INFO", ""), lambda _: endpoint_path(request.environ)
            )
        )
        if path == self._metrics_path and path:
            return self._metrics(request)
        if self.auth is not None and self.auth.metadata_path in (
            path,
            (request.script_root + request.path).rstrip("/"),
        ):
            return self._metadata(request)
        if path != self.endpoint:
            return self._refuse(
                404, INVALID_REQUEST, f"Not Found: the MCP endpoint is {request.script_root + self.endpoint or '/'}"
            )
        if request.method == "OPTIONS":
            return self._preflight(request)
        if isinstance(request, WsgiRequest) and request.unauthorized is not None:
            # The framework's authentication needs a user and found none: refused here, after
            # the Origin check and the preflight, so that a page of an allowed origin reads it.
            challenge, message = request.unauthorized
            return self._refuse(401, INVALID_REQUEST, message, headers={"WWW-Authenticate": challenge})
        principal = None
        if self.auth is None:
            # The site's user, when a framework's authentication established one, is whom
            # sessions, tasks and requestState are bound to, as a token's principal would be.
            principal = site_principal(request.user) if isinstance(request, WsgiRequest) and request.user else None
        else:
            try:
                principal = self.auth.authenticate(request.headers.get("Authorization"))
            except Challenge as exc:
                return refused(self.server, challenge_response(exc))
            except VerifierUnavailable as exc:
                return self._refuse(
                    503,
                    jsonrpc.INTERNAL_ERROR,
                    f"Service Unavailable: {exc}; try again later",
                    headers={"Retry-After": str(exc.retry_after)},
                )
        # Whose fair shares of the threads and rate limits this request counts in (zemcp.state.shares).
        client = shares.client_key(
            principal.user if principal is not None else None, self._addresses.of(request.environ)
        )
        try:
            return self._route(request, principal, client)
        except StateUnavailable as exc:
            return outcomes.refusal(self.server, exc, None)

    def _route(self, request: Request, principal: Principal | None, client: str) -> WSGIResponse:
        """Hand an authenticated request of the endpoint on by method.

        Raises:
            StateUnavailable: the shared state (Redis) cannot be reached.
        """
        if request.method == "POST":
            return self._post(request, principal, client)
        has_session = request.headers.get(SESSION_HEADER) is not None
        if request.method == "DELETE" and has_session:
            return self.sessions.delete(request, principal)
        if request.method == "GET" and has_session:
            return self.sessions.get(request, principal, client)
        if request.method == "GET":
            why = (
                "GET reads a session's SSE stream and needs its Mcp-Session-Id header (2026-07-28 clients "
                "use subscriptions/listen)"
            )
        elif request.method == "DELETE":
            why = "DELETE ends a session and needs its Mcp-Session-Id header (2026-07-28 requests have no sessions)"
        else:
            why = f"{request.method} is not supported"
        return self._refuse(
            405,
            INVALID_REQUEST,
            f"Method Not Allowed: {why}; use POST (and GET or DELETE with a session)",
            headers={"Allow": ALLOW},
        )

    def _refuse(
        self, status: int, code: int, text: str, headers: dict[str, Any] | None = None, id: RequestId | None = None
    ) -> Response:
        """A JSON-RPC error response of ``status``, counted as a refusal (its reason by its status)."""
        return refused(self.server, error_response(status, code, text, headers, id))

    def _metrics(self, request: Request) -> Response:
        """GET of ``metrics_path``: the Prometheus text, for an allowed address or a valid token.

        A client address outside ``metrics_allow`` without a token that authorization
        accepts gets 403 (or the 401 challenge when authorization is on); a unix socket's
        peer (no address) may read them.
        """
        prometheus = self.server.telemetry.prometheus
        assert prometheus is not None  # metrics_path set means the Prometheus exporter is on
        if request.method not in ("GET", "HEAD"):
            return refused(
                self.server,
                Response(
                    f"Method Not Allowed: {self._metrics_path} serves metrics to GET\n", 405, {"Allow": "GET, HEAD"}
                ),
            )
        address = self._addresses.of(request.environ)
        # No address: a unix socket's peer, which only this host's processes can be.
        allowed = address == ""
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(address)
            allowed = any(ip in network for network in self._metrics_readers)
        if not allowed and self.auth is not None:
            try:
                self.auth.authenticate(request.headers.get("Authorization"))
            except Challenge as exc:
                return refused(self.server, challenge_response(exc))
            except VerifierUnavailable as exc:
                return refused(
                    self.server, Response(f"Service Unavailable: {exc}\n", 503, {"Retry-After": str(exc.retry_after)})
                )
            allowed = True
        if not allowed:
            return refused(
                self.server,
                Response(
                    f"Forbidden: {address} may not read the metrics; list its address or network in "
                    "ZEMCP_METRICS_ALLOW\n",
                    403,
                    mimetype="text/plain",
                ),
            )
        return Response(prometheus.exposition(), 200, {"Content-Type": prometheus.content_type})

    def _preflight(self, request: Request) -> Response:
        """``OPTIONS``: a browser's CORS preflight (from an allowed Origin, checked before), else the methods."""
        origin = request.headers.get("Origin")
        if origin is None or "Access-Control-Request-Method" not in request.headers:
            return empty_response(204, {"Allow": ALLOW})
        return empty_response(
            204, cors.preflight_headers(origin, request.headers.get("Access-Control-Request-Headers"))
        )

    def _metadata(self, request: Request) -> Response:
        """The Protected Resource Metadata document (RFC 9728), served without a token."""
        if request.method == "OPTIONS":
            return self._preflight(request)
        if request.method not in ("GET", "HEAD"):
            return self._refuse(
                405,
                INVALID_REQUEST,
                "Method Not Allowed: the resource metadata is read with GET",
                headers={"Allow": "GET, HEAD, OPTIONS"},
            )
        assert self.auth is not None  # dispatch serves the metadata only with authorization on
        return json_response(
            200,
            self.auth.metadata(self.server.declared_scopes()),
            headers={"Cache-Control": f"public, max-age={METADATA_MAX_AGE}"},
        )

    def _check_origin_and_host(self, request: Request, check_host: bool = True) -> Response | None:
        origin = request.environ.get("HTTP_ORIGIN")
        host = request.environ.get("HTTP_HOST")
        if (
            origin is not None
            and not _remembered(self._origin_cache, origin, self._origin_allowed)
            # A framework's page of the site itself: the framework judged the Host (ALLOWED_HOSTS).
            and not (not check_host and host is not None and urlsplit(origin).netloc.lower() == host.lower())
        ):
            log.warning("refused Origin %s", logsafe.clip(origin))
            return self._refuse(
                403,
                INVALID_REQUEST,
                f"Forbidden: Origin {origin!r} is not allowed; add it to ZEMCP_ALLOWED_ORIGINS (ALLOWED_ORIGINS in "
                "a Django or Flask site's ZEMCP settings)",
            )
        if (
            host is not None
            and check_host
            and self._check_host
            and not _remembered(self._host_cache, host, _is_loopback_name)
        ):
            log.warning("refused Host %s on a loopback bind. %s", logsafe.clip(host), HOST_FIX)
            return self._refuse(
                403,
                INVALID_REQUEST,
                f"Forbidden: Host {host!r} is not a loopback name, and this server is bound to loopback "
                f"(ZEMCP_BIND), where it serves loopback names only (its guard against DNS rebinding). {HOST_FIX}",
            )
        return None

    def _accepts_both(self, request: Request) -> bool:
        """True when ``Accept`` accepts both application/json and text/event-stream (werkzeug's rules)."""
        value = request.environ.get("HTTP_ACCEPT")
        if not value:
            return False
        return _remembered(
            self._accept_cache,
            value,
            lambda _: bool(
                request.accept_mimetypes["application/json"] and request.accept_mimetypes["text/event-stream"]
            ),
        )

    def _origin_allowed(self, origin: str) -> bool:
        normalized = origin.rstrip("/").lower()
        if normalized in self.settings.allowed_origins:
            return True
        parts = urlsplit(normalized)
        return parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback_host(parts.hostname)

    def _post(self, request: Request, principal: Principal | None, client: str) -> WSGIResponse:
        if not _remembered(self._content_type_cache, request.environ.get("CONTENT_TYPE", ""), _is_json):
            got = repr(request.mimetype) if request.mimetype else "none"
            return self._refuse(
                415, INVALID_REQUEST, f"Unsupported Media Type: Content-Type must be application/json, got {got}"
            )
        if not self._accepts_both(request):
            return self._refuse(
                406,
                INVALID_REQUEST,
                "Not Acceptable: the Accept header must list both application/json and text/event-stream",
            )
        try:
            body = self._read_body(request)
        except TimeoutError:
            sock = request.environ.get("gunicorn.socket")
            if sock is not None:
                # Stop reading from the stalled client, so gunicorn does not wait to drain
                # the rest of its body before freeing this thread.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)
            return self._refuse(
                408,
                INVALID_REQUEST,
                f"Request Timeout: the body stalled for over {self.settings.body_timeout:g} s (ZEMCP_BODY_TIMEOUT)",
            )
        if body is None:
            return self._refuse(
                413,
                INVALID_REQUEST,
                f"Payload Too Large: the body exceeds {self.settings.max_body_bytes} bytes (ZEMCP_MAX_BODY_BYTES)",
            )
        try:
            message = jsonrpc.parse(body)
        except ProtocolError as exc:
            return refused(self.server, json_response(400, exc.to_message()))
        context = self._context(request, principal, client)
        try:
            # The era is decided here, once; its pipeline does the rest.
            if selects_modern(message, request.headers):
                outcome = self._serve_modern(message, context)
                status_of = outcomes.modern_status
            else:
                self._find_session(message, request, context)
                outcome = self._serve_handshake(message, context)
                status_of = outcomes.handshake_status
        except outcomes.REFUSALS as exc:
            return outcomes.refusal(self.server, exc, message)
        session = context.session
        headers = (
            {SESSION_HEADER: session.id}
            if isinstance(message, jsonrpc.Request) and message.method == "initialize" and session is not None
            else None
        )
        return outcomes.answer(outcome, message, request.environ, self.settings.keepalive_interval, status_of, headers)

    def _find_session(self, message: jsonrpc.Message, request: Request, context: RequestContext) -> None:
        """Give a handshake-era message's context the session its ``Mcp-Session-Id`` names.

        Raises:
            ProtocolError: the header came twice, or ``MCP-Protocol-Version`` names no version
                of a session; ``initialize`` named a live session of the same principal.
            SessionRequired, SessionNotFound: no header, or no live session of the principal has the id.
        """
        session_id = session_header(request.environ)
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            if session_id is not None and self.handshake.initialized(session_id, context.principal):
                raise ProtocolError(
                    INVALID_REQUEST,
                    "Bad Request: this session is already initialized; to start a "
                    "new session, send initialize without the Mcp-Session-Id header",
                )
            return
        check_protocol_header(request.environ.get(VERSION_KEY))
        context.session = self.handshake.session_of(session_id, context.principal)

    def _context(self, request: Request, principal: Principal | None, client: str) -> RequestContext:
        """The context of a POSTed message: who acts, whose shares, its headers and trace, how to reply."""
        environ = request.environ
        trace = (
            {name: environ[key] for key, name in _TRACE_KEYS.items() if key in environ}
            if "HTTP_TRACEPARENT" in environ
            else None
        )
        keepalive, send_timeout = self.settings.keepalive_interval, self.settings.body_timeout

        def open_sink(streams: StreamLogs | None, request_id: RequestId | None) -> ReplySink | DirectSink:
            return new_sink(environ, keepalive, streams, send_timeout, request_id)

        return RequestContext(
            TCP,
            open_sink,
            principal=principal,
            user=request.user if isinstance(request, WsgiRequest) else None,
            request=request.site_request if isinstance(request, WsgiRequest) else None,
            client=client,
            headers=request.headers,
            trace=trace,
            can_wait=bool(environ.get("wsgi.multithread")),
        )

    def _read_body(self, request: Request) -> bytes | None:
        """The whole body, or None when it is over the limit (chunked bodies included).

        Raises:
            TimeoutError: under gunicorn, the client sent nothing for ``body_timeout`` seconds.
        """
        limit = self.settings.max_body_bytes
        environ = request.environ
        length = get_content_length(environ.get("CONTENT_LENGTH"), environ.get("HTTP_TRANSFER_ENCODING"))
        if length is not None and length > limit:
            return None
        # A client that stalls mid-body would hold this thread for good; bound each wait.
        client = request.environ.get("gunicorn.socket")
        if client is not None:
            client.settimeout(self.settings.body_timeout)
        try:
            if length is not None:
                # The common case: one read of the declared length (PEP 3333), no stream wrapper.
                body: bytes = request.environ["wsgi.input"].read(length)
                if len(body) < length:
                    raise ClientDisconnected()
                request.environ[_BODY_READ] = True
                return body
            stream = request.stream
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = stream.read(min(65536, limit + 1 - total))
                if not chunk:
                    request.environ[_BODY_READ] = True
                    return b"".join(chunks)
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    return None
        finally:
            if client is not None:
                client.settimeout(None)


def _body_left_unread(environ: dict[str, Any]) -> bool:
    """True when the request has a body (a ``Content-Length`` above 0, or chunked) that was not read whole."""
    if environ.get(_BODY_READ):
        return False
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    return chunked or environ.get("CONTENT_LENGTH", "") not in ("", "0")


def _close_connection(start_response: StartResponse) -> None:
    """Make the server answer ``Connection: close`` and close the connection after this response.

    gunicorn's ``start_response`` is a method of its response, whose ``force_close`` does
    both; other servers are left as they are (PEP 3333 gives applications no say).
    """
    force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
    if callable(force_close):
        force_close()


def _is_json(content_type: str) -> bool:
    """True when a ``Content-Type`` value names ``application/json`` (parameters aside, any case)."""
    return parse_options_header(content_type)[0].lower() == "application/json"


def _is_loopback_name(host: str) -> bool:
    return is_loopback_host(urlsplit("//" + host).hostname or "")


_Verdict = TypeVar("_Verdict")


def _remembered(cache: dict[str, _Verdict], value: str, judge: Callable[[str], _Verdict]) -> _Verdict:
    """``judge(value)``, remembered in ``cache`` for up to :data:`VERDICT_CACHE_SIZE` distinct values."""
    known = cache.get(value)
    if known is None:
        known = judge(value)
        if len(cache) < VERDICT_CACHE_SIZE:
            cache[value] = known
    return known
