"""MCP's stdio transport (basic/transports/stdio): one client, newline-delimited JSON-RPC.

The client starts the server as a subprocess and writes one JSON-RPC message per line to its
stdin; the server writes one per line to stdout and logs to stderr. The same
:class:`zemcp.Server`, with the same handlers, serves it as over HTTP: each message goes with
its :class:`zemcp.eras.requestcontext.RequestContext` through the same pipeline
(:mod:`zemcp.pipeline`) to the same era (:meth:`zemcp.eras.handshake.era.HandshakeEra.serve`,
:meth:`zemcp.eras.modern.era.ModernEra.serve`), and every running handler's messages are pumped to
stdout by a thread of its own, so the reader keeps reading: a handler waiting for the answer
to its ``elicitation/create`` gets it while other requests are served. The connection is one
client, which started the server for itself: it has no fair shares to keep and no rate limits.

The era is decided once, by the first request (2026-07-28 basic/transports/stdio): a request
other than ``initialize`` whose ``params._meta`` names a protocol version opens a 2026-07-28
connection (no session; elicitation by multi-round-trip); anything else, a handshake-era one
(``initialize``, one session for the connection's life). The end of stdin ends the session:
waiting handlers wake with ``SessionEnded``; so do SIGTERM, SIGINT and the exit of the parent
process (the client).

stdout carries MCP messages only (basic/transports/stdio: the server MUST NOT write anything
else there): :func:`claim_stdio` keeps the protocol on duplicates of descriptors 0 and 1
before the target is imported, and points descriptor 1 at stderr and 0 at ``/dev/null``, so
neither a ``print``, an ``os.write(1, ...)`` nor a child process can corrupt the stream or
read the client's messages. A line is at most ``max_body_bytes`` long, the bound of an HTTP
body; a longer one is answered with an error and skipped.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, cast

from zemcp import logformat, logsafe
from zemcp.auth.principal import site_principal
from zemcp.cli.lifetime import watch_parent
from zemcp.core.admission import Busy
from zemcp.core.server import Server
from zemcp.eras.handshake.era import HandshakeEra
from zemcp.eras.modern.era import ModernEra
from zemcp.eras.requestcontext import PIPE, Outcome, RequestContext, Running
from zemcp.pipeline import compose
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.envelope import META_VERSION, UNSUPPORTED_VERSION
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError
from zemcp.replies.sinks import ReplySink
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.session import Session
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound
from zemcp.state.streamlogs import KEEPALIVE
from zemcp.state.tasks import TaskLimitReached
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from zemcp.protocol.jsonrpc import RequestId
    from zemcp.state.streamlogs import StreamLogs

log = logging.getLogger("zemcp.stdio")

#: What refuses a request before its handler runs; answered with a JSON-RPC error.
REFUSALS = (SessionNotFound, Busy, ListenLimitReached, TaskLimitReached, StateUnavailable)
#: [seconds] how often a pump thread looks again at a quiet running request.
PUMP_TICK = 1.0
#: [seconds] how long the end of stdin waits for running handlers to send their last messages.
DRAIN_TIMEOUT = 5.0
#: [bytes] how much of a line over the limit is read (and dropped) at a time.
DISCARD_CHUNK = 64 * 1024


class Stopped(BaseException):
    """A signal stopped the transport (a BaseException, so no handler's ``except Exception``
    swallows it on its way out of the reading loop)."""


class StdioTransport:
    """Serves one client over a pair of byte streams (stdin and stdout of the process).

    Args:
        server: the MCP server core.
        reader: where the client's messages arrive, one per line.
        writer: where the server's messages go, one per line (nothing else is written there).
        user: whom every message acts for (``ctx.user``, asked by ``permission=`` rules): a
            site's user, as ``manage.py zemcp stdio --user`` loads it; None for none.
    Raises:
        ValueError: the server's MCP Apps declarations do not hold together
            (:meth:`zemcp.Server.check_apps`).
    """

    def __init__(self, server: Server, reader: IO[bytes], writer: IO[bytes], user: Any = None):
        self.server = server
        self._user = user
        # Whom the session and tasks belong to, as the principal of an HTTP site user is.
        self._principal = site_principal(user) if user is not None else None
        server.check_apps()
        self.handshake = HandshakeEra(server)
        self.modern = ModernEra(server)
        self._serve_handshake = compose(server, self.handshake.serve)
        self._serve_modern = compose(server, self.modern.serve)
        self._reader = reader
        self._writer = writer
        self._write_lock = threading.Lock()
        self._era: str | None = None  # "handshake" or "modern", decided by the first request
        self._session: Session | None = None
        # Running 2026-07-28 requests by id: notifications/cancelled closes their sink.
        self._running: dict[Any, ReplySink] = {}
        self._pumps: list[threading.Thread] = []
        self._max_line = server.settings.max_body_bytes
        #: True while :meth:`serve` reads stdin (before the drain).
        self.reading = False

    def serve(self) -> None:
        """Read and answer messages until stdin ends, stdout is closed or :class:`Stopped` is
        raised (by a signal handler); then end the session and drain.

        A line is at most ``max_body_bytes`` long, without its newline: a longer one is
        answered with -32600 (id ``null``), read to its newline without being kept, and
        reading goes on.
        """
        reason = "the client closed stdin"
        self.reading = True
        try:
            while line := self._reader.readline(self._max_line + 1):
                if len(line) > self._max_line and not line.endswith(b"\n"):
                    self._skip_long_line()
                elif line.strip():
                    self._receive(line)
        except BrokenPipeError:
            reason = "the client closed stdout"
        except Stopped as exc:
            reason = f"the server was stopped by {exc}"
        finally:
            self.reading = False
            log.info("ending: %s", reason)
            self._close(reason)

    def write(self, message: dict[str, Any]) -> None:
        """Write one message as one line (compact JSON never holds a newline)."""
        data = jsonrpc.encode(message) + b"\n"
        with self._write_lock:
            self._writer.write(data)
            self._writer.flush()

    # -- reading ----------------------------------------------------------------------

    def _skip_long_line(self) -> None:
        log.warning("a line longer than %d bytes (ZEMCP_MAX_BODY_BYTES) was skipped", self._max_line)
        self.write(
            jsonrpc.error(
                None,
                INVALID_REQUEST,
                f"Invalid Request: a line exceeds {self._max_line} bytes, the largest message this server "
                "reads (the max_body_bytes setting, ZEMCP_MAX_BODY_BYTES); it was skipped up to its newline",
            )
        )
        # Read in chunks and drop them: keeping the line is what the bound prevents.
        while chunk := self._reader.readline(DISCARD_CHUNK):
            if chunk.endswith(b"\n"):
                return

    def _receive(self, line: bytes) -> None:
        try:
            message = jsonrpc.parse(line)
        except ProtocolError as exc:
            self.write(exc.to_message())
            return
        try:
            self._dispatch(message)
        except BrokenPipeError:
            raise
        except Exception:
            # A bug met by one message must not end the connection, as it would not end an
            # HTTP server: the request gets -32603 and reading goes on.
            method = message.method if not isinstance(message, jsonrpc.Response) else "a response"
            log.exception("handling %s failed", logsafe.clip(method))
            if isinstance(message, jsonrpc.Request):
                self.write(
                    jsonrpc.error(
                        message.id,
                        INTERNAL_ERROR,
                        "Internal error: the server failed on this request; its log says why",
                    )
                )

    def _dispatch(self, message: jsonrpc.Message) -> None:
        if isinstance(message, jsonrpc.Request) and self._era is None:
            self._era = "modern" if message.method != "initialize" and _enveloped(message) else "handshake"
        if self._era == "modern":
            self._modern(message)
        else:
            self._handshake(message)

    def _context(self) -> RequestContext:
        """The context of a message of this connection: one client, no headers, answers read on
        another thread (so handlers may wait), and a sink a pump thread drains."""
        return RequestContext(PIPE, _pumped_sink, session=self._session, principal=self._principal, user=self._user)

    def _handshake(self, message: jsonrpc.Message) -> None:
        session = self._session
        if isinstance(message, jsonrpc.Request) and message.method == "initialize":
            self._initialize(message)
            return
        if session is None:
            if isinstance(message, jsonrpc.Request):
                self.write(jsonrpc.error(message.id, INVALID_REQUEST, "Invalid Request: send initialize first"))
            return
        if isinstance(message, jsonrpc.Request) and _enveloped(message):
            self.write(
                jsonrpc.error(
                    message.id,
                    INVALID_REQUEST,
                    "Invalid Request: this connection started with "
                    "initialize (the handshake era); a 2026-07-28 request needs a new connection",
                )
            )
            return
        # A client's answer is taken by the call waiting for it, or dropped (nothing to tell).
        self._answer(message, self._serve_handshake, cancellable=False)

    def _initialize(self, message: jsonrpc.Request) -> None:
        if self._session is not None:
            self.write(
                jsonrpc.error(
                    message.id,
                    INVALID_REQUEST,
                    "Invalid Request: this connection is already initialized; start a new process for a new session",
                )
            )
            return
        context = self._context()
        try:
            outcome = self._serve_handshake(message, context)
        except ProtocolError as exc:
            self.write(jsonrpc.error(message.id, exc.code, exc.message, exc.data))
            return
        except (SessionLimitReached, StateUnavailable) as exc:
            self.write(jsonrpc.error(message.id, INVALID_REQUEST, str(exc)))
            return
        self._session = context.session
        self._write_outcome(outcome, message.id)

    def _modern(self, message: jsonrpc.Message) -> None:
        if isinstance(message, jsonrpc.Response):
            return  # a 2026-07-28 client sends no responses: answers ride the retried request
        if isinstance(message, jsonrpc.Notification):
            request_id = message.params.get("requestId")
            # Other ids are ignored, as basic/utilities/cancellation allows (and an object or an
            # array could not even be looked up).
            if message.method == "notifications/cancelled" and jsonrpc.valid_id(request_id):
                sink = self._running.get(request_id)
                if sink is not None:
                    sink.close()
            return
        if message.method == "initialize":
            self.write(
                jsonrpc.error(
                    message.id,
                    UNSUPPORTED_VERSION,
                    "Unsupported protocol version: this "
                    f"connection speaks {' or '.join(versions.MODERN)}, which has no initialize",
                    {"supported": list(versions.MODERN)},
                )
            )
            return
        self._answer(message, self._serve_modern, cancellable=True)

    # -- writing ----------------------------------------------------------------------

    def _answer(self, message: jsonrpc.Message, serve: Any, cancellable: bool) -> None:
        """Serve ``message`` through its era's pipeline and write (or pump) what it gives.

        Args:
            cancellable: a running request of this era is cancelled by closing its sink
                (2026-07-28); a handshake-era request is cancelled by its era, whose waiting
                call still tells the client of its withdrawn questions.
        """
        request_id = message.id if isinstance(message, jsonrpc.Request) else None
        try:
            outcome = serve(message, self._context())
        except REFUSALS as exc:
            if not isinstance(message, jsonrpc.Request):
                return
            code = INVALID_REQUEST if isinstance(exc, SessionNotFound) else INTERNAL_ERROR
            outcome = jsonrpc.error(request_id, code, str(exc))
        if isinstance(message, jsonrpc.Request):
            self._write_outcome(outcome, request_id, cancellable)

    def _write_outcome(self, outcome: Outcome, request_id: Any, cancellable: bool = False) -> None:
        if isinstance(outcome, dict):
            self.write(outcome)
            return
        # Every sink of this transport is a ReplySink (_pumped_sink), drained by a pump thread.
        sink = cast(ReplySink, outcome.sink if isinstance(outcome, Running) else outcome)
        if cancellable:
            self._running[request_id] = sink
        pump = threading.Thread(target=self._pump, args=(sink, request_id), name="zemcp-stdio-pump", daemon=True)
        self._pumps = [p for p in self._pumps if p.is_alive()] + [pump]
        pump.start()

    def _pump(self, sink: ReplySink, request_id: Any) -> None:
        """Write a running request's messages, then its response, as they come."""
        try:
            for item in sink.frames(PUMP_TICK):
                if item is not KEEPALIVE:
                    self.write(cast("dict[str, Any]", item))
        except (BrokenPipeError, ValueError):
            log.info("stdout is closed; the client went away")
        finally:
            sink.close()
            self._running.pop(request_id, None)

    def _close(self, reason: str) -> None:
        if self._session is not None:
            self.server.sessions.end(self._session.id, reason)
        for sink in list(self._running.values()):
            sink.close()
        for pump in self._pumps:
            pump.join(DRAIN_TIMEOUT)


def _pumped_sink(streams: StreamLogs | None, request_id: RequestId | None) -> ReplySink:
    """The sink of a running request of a stdio connection: a pump thread drains it (a
    connection that stays open has nothing to resume, so ``streams`` is not used)."""
    return ReplySink()


def _enveloped(message: jsonrpc.Request) -> bool:
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """Keep this process's stdin and stdout for MCP messages alone (basic/transports/stdio).

    Call it before importing the code to serve, so that what it writes at import time is
    redirected too. Descriptors 0 and 1 are duplicated for the protocol (duplicates that
    child processes do not inherit); then descriptor 1 and ``sys.stdout`` point at stderr,
    and descriptor 0 at ``/dev/null``.

    Returns:
        ``(reader, writer)``: the client's messages, and where the server's go.
    """
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    return reader, writer


def log_to_stderr(log_level: str, log_format: str = "text") -> None:
    """Send log records of ``log_level`` and above to stderr, stdio's log channel.

    Args:
        log_level: ``"debug"``, ``"info"``, ``"warning"``, ``"error"`` or ``"critical"``.
        log_format: ``Settings.log_format``: ``"text"`` (``<time> [<pid>] [<LEVEL>] <logger>:
            <message>``) or ``"json"`` (one object a line, :mod:`zemcp.logformat`).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(process)d] [%(levelname)s] %(name)s: %(message)s"))
    logformat.install(handler, log_format)
    logging.basicConfig(level=log_level.upper(), handlers=[handler])


def run(server: Server, reader: IO[bytes], writer: IO[bytes], user: Any = None) -> None:
    """Serve ``server`` on ``reader`` and ``writer`` (from :func:`claim_stdio`) until stdin
    ends, as ``zemcp run --transport stdio`` does; call it from the main thread. ``user`` is
    whom every message acts for (:class:`StdioTransport`).

    SIGTERM and SIGINT stop it cleanly, as the end of stdin does: the session ends, waiting
    handlers wake with ``SessionEnded``, and the function returns. So does the exit of the
    parent process (the client), which a client that crashed cannot announce. A signal
    during the drain that follows cuts the drain short.
    """
    main = threading.main_thread().ident
    assert main is not None  # the main thread has started: this code runs
    transport = StdioTransport(server, reader, writer, user)

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)

    def parent_exited(pid: int) -> None:
        if transport.reading:
            log.info("the client (the parent process, pid %d) exited; stopping", pid)
            # Sent to the main thread itself: only there does it interrupt the blocking read.
            signal.pthread_kill(main, signal.SIGTERM)

    watch_parent(parent_exited)
    try:
        transport.serve()
    except Stopped as exc:
        log.warning("%s during the drain: running requests were not waited for", exc)
