"""MCP's stdio transport (basic/transports/stdio): one client, newline-delimited JSON-RPC.

The client starts the server as a subprocess and writes one JSON-RPC message per line to its
stdin; the server writes one per line to stdout and logs to stderr. The same
:class:`zemcp.Server`, with the same handlers, serves it as over HTTP: the era modules'
transport-neutral entry points do the work (:meth:`zemcp.eras.handshake.era.HandshakeEra.handle`,
:meth:`zemcp.eras.modern.era.ModernEra.handle`), and every running handler's messages are pumped to
stdout by a thread of its own, so the reader keeps reading: a handler waiting for the answer
to its ``elicitation/create`` gets it while other requests are served.

The era is decided once, by the first request (2026-07-28 basic/transports/stdio): a request
other than ``initialize`` whose ``params._meta`` names a protocol version opens a 2026-07-28
connection (no session; elicitation by multi-round-trip); anything else, a handshake-era one
(``initialize``, one session for the connection's life). The end of stdin ends the session:
waiting handlers wake with ``SessionEnded``.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, cast

from zemcp.core.admission import Busy
from zemcp.core.server import Server
from zemcp.eras.handshake.era import HandshakeEra
from zemcp.eras.modern.era import META_VERSION, UNSUPPORTED_VERSION, ModernEra, retire_codes
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError
from zemcp.replies.sinks import ReplySink
from zemcp.state.interfaces import KEEPALIVE, ListenLimitReached, SessionLimitReached, SessionNotFound
from zemcp.state.session import Session

if TYPE_CHECKING:
    from zemcp.replies.direct import DirectSink

log = logging.getLogger("zemcp.stdio")

#: The environ the era modules get: answers are read on another thread, so handlers may wait.
ENVIRON = {"wsgi.multithread": True}
#: [seconds] how often a pump thread looks again at a quiet running request.
PUMP_TICK = 1.0
#: [seconds] how long the end of stdin waits for running handlers to send their last messages.
DRAIN_TIMEOUT = 5.0


class StdioTransport:
    """Serves one client over a pair of byte streams (stdin and stdout of the process).

    Args:
        server: the MCP server core.
        reader: where the client's messages arrive, one per line.
        writer: where the server's messages go, one per line (nothing else is written there).
    """

    def __init__(self, server: Server, reader: IO[bytes], writer: IO[bytes]):
        self.server = server
        self.handshake = HandshakeEra(server)
        self.modern = ModernEra(server)
        self._reader = reader
        self._writer = writer
        self._write_lock = threading.Lock()
        self._era: str | None = None  # "handshake" or "modern", decided by the first request
        self._session: Session | None = None
        # Running 2026-07-28 requests by id: notifications/cancelled closes their sink.
        self._running: dict[Any, ReplySink] = {}
        self._pumps: list[threading.Thread] = []

    def serve(self) -> None:
        """Read and answer messages until stdin ends; then end the session and drain."""
        try:
            for line in self._reader:
                if line.strip():
                    self._receive(line)
        finally:
            self._close()

    def write(self, message: dict[str, Any]) -> None:
        """Write one message as one line (compact JSON never holds a newline)."""
        data = jsonrpc.encode(message) + b"\n"
        with self._write_lock:
            self._writer.write(data)
            self._writer.flush()

    # -- reading ----------------------------------------------------------------------

    def _receive(self, line: bytes) -> None:
        try:
            message = jsonrpc.parse(line)
        except ProtocolError as exc:
            self.write(exc.to_message())
            return
        if isinstance(message, jsonrpc.Request) and self._era is None:
            self._era = "modern" if message.method != "initialize" and _enveloped(message) else "handshake"
        if self._era == "modern":
            self._modern(message)
        else:
            self._handshake(message)

    def _handshake(self, message: jsonrpc.Message) -> None:
        session = self._session
        if isinstance(message, jsonrpc.Response):
            if session is not None:
                self.server.pending.resolve(session.id, message)
            return
        if isinstance(message, jsonrpc.Notification):
            if session is not None and message.method == "notifications/cancelled":
                self.handshake.cancel(session, message.params)
            return
        if message.method == "initialize":
            self._initialize(message)
            return
        if _enveloped(message):
            self.write(
                jsonrpc.error(
                    message.id,
                    INVALID_REQUEST,
                    "Invalid Request: this connection started with "
                    "initialize (the handshake era); a 2026-07-28 request needs a new connection",
                )
            )
            return
        if session is None:
            self.write(jsonrpc.error(message.id, INVALID_REQUEST, "Invalid Request: send initialize first"))
            return
        try:
            outcome = self.handshake.handle(session, message, ENVIRON)
        except (SessionNotFound, Busy) as exc:
            outcome = jsonrpc.error(message.id, INTERNAL_ERROR if isinstance(exc, Busy) else INVALID_REQUEST, str(exc))
        self._answer(outcome)

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
        try:
            self._session, result = self.handshake.open_session(message)
        except ProtocolError as exc:
            self.write(jsonrpc.error(message.id, exc.code, exc.message, exc.data))
            return
        except SessionLimitReached as exc:
            self.write(jsonrpc.error(message.id, INVALID_REQUEST, str(exc)))
            return
        self.write(jsonrpc.result(message.id, result))

    def _modern(self, message: jsonrpc.Message) -> None:
        if isinstance(message, jsonrpc.Response):
            return  # a 2026-07-28 client sends no responses: answers ride the retried request
        if isinstance(message, jsonrpc.Notification):
            if message.method == "notifications/cancelled":
                sink = self._running.get(message.params.get("requestId"))
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
        try:
            outcome = self.modern.handle(message, ENVIRON)
        except ProtocolError as exc:
            outcome = jsonrpc.error(message.id, exc.code, exc.message, exc.data)
        except (Busy, ListenLimitReached) as exc:
            outcome = jsonrpc.error(message.id, INTERNAL_ERROR, str(exc))
        if isinstance(outcome, dict):
            outcome = retire_codes(outcome)
        else:
            self._running[message.id] = cast(ReplySink, outcome)  # see _answer
        self._answer(outcome, message.id)

    # -- writing ----------------------------------------------------------------------

    def _answer(self, outcome: dict[str, Any] | ReplySink | DirectSink, request_id: Any = None) -> None:
        if isinstance(outcome, dict):
            self.write(outcome)
            return
        # ENVIRON has no gunicorn socket: new_sink gives a ReplySink, never a DirectSink.
        outcome = cast(ReplySink, outcome)
        pump = threading.Thread(target=self._pump, args=(outcome, request_id), name="zemcp-stdio-pump", daemon=True)
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

    def _close(self) -> None:
        if self._session is not None:
            self.server.sessions.end(self._session.id, "the client closed stdin")
        for sink in list(self._running.values()):
            sink.close()
        for pump in self._pumps:
            pump.join(DRAIN_TIMEOUT)


def _enveloped(message: jsonrpc.Request) -> bool:
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def run(server: Server, log_level: str = "info") -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin ends (``zemcp run --transport stdio``).

    Logs go to stderr at ``log_level``; stdout carries MCP messages only, so a handler's
    ``print`` is sent to stderr as well.
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="%(asctime)s [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )
    out = sys.stdout.buffer
    # Anything printed by application code would corrupt the channel: send it to stderr.
    sys.stdout = sys.stderr
    StdioTransport(server, sys.stdin.buffer, out).serve()
