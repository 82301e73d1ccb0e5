"""zemcp's gunicorn worker: gthread, with limits on connections that send nothing or half a head.

gunicorn's gthread worker hands every new connection to a thread at once, and that thread
waits up to 5 s for the first bytes, then blocks without a limit while it reads the request
head. A few dozen connections that send nothing, or that send ``POST /mcp HTTP/1.1`` and a
header and then stop, thereby hold every thread: pings and elicitation answers queue
behind them. This worker changes these things, through gunicorn's own classes:

- a connection's request head (of its first request, of every later one on a kept-alive
  connection, and of one pipelined behind another) is gathered on the worker's poller,
  which costs no thread; only a whole head is handed to a thread. A connection that has not
  sent a whole head within ``head_timeout`` seconds is closed, and one whose head grows past
  64 KiB is answered 431 and closed;
- under TLS, where bytes can be read only after the handshake on a thread, each wait for
  more bytes of a head is bounded by ``head_timeout`` instead;
- a connection closed after its response (``Connection: close``, a stream the server ended)
  lingers on the poller while its unread bytes drain (RFC 9112 section 9.6), for
  :data:`LINGER_TIMEOUT` seconds at most. gunicorn lingers on its main thread instead, which
  stops every other connection of the worker for up to 2 s per closing connection whose
  client keeps its side open;
- with several workers (under zemcp's gunicorn configuration, whose hooks share a table of
  the workers' loads, :mod:`zemcp.http.workerloads`), connections go to the workers with
  room: a worker takes a waiting connection at once only when no sibling is less loaded,
  otherwise it leaves it to that sibling for :data:`DEFER_STEP` seconds at a time, and
  takes it anyway after :data:`MAX_DEFER`; and with shared state (``ZEMCP_REDIS_URL``) a
  worker whose busy connections fill its ``pending_budget`` hands a request whose head is
  whole, on a new or a kept-alive connection, to a sibling with room, connection and all.

Use it as gunicorn's ``worker_class = "zemcp.http.worker.ThreadWorker"`` (the repository's
gunicorn.conf.py does); ``ZEMCP_HEAD_TIMEOUT`` sets the limit.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, cast

from gunicorn.workers import gthread

from zemcp.config import Settings
from zemcp.http import workerloads

if TYPE_CHECKING:
    from concurrent.futures import Future

    from _typeshed import WriteableBuffer
    from gunicorn.http.parser import RequestParser
    from gunicorn.http.unreader import Unreader


class _HeadLimitedSocket(socket.socket):
    """A client socket whose blocking reads while a thread reads a head wait ``head_timeout`` at most.

    A backstop for the heads a thread still reads from the socket (under TLS): gunicorn
    switches the socket to blocking mode before it parses each request, and here that mode
    has a timeout. A read that times out then reads as the end of the stream, which gunicorn
    treats as a client that left (no error logged). Once the application sets a timeout of its
    own (zemcp bounds body reads with ``body_timeout``), its timeouts raise as usual.
    """

    head_timeout = 5.0
    _reading_head = False

    def setblocking(self, flag: bool) -> None:
        if flag:
            self._reading_head = True
            super().settimeout(self.head_timeout)
        else:
            self._reading_head = False
            super().setblocking(False)

    def settimeout(self, value: float | None) -> None:
        self._reading_head = False
        super().settimeout(value)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            if self._reading_head:
                return b""
            raise

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0, flags: int = 0) -> int:
        try:
            return super().recv_into(buffer, nbytes, flags)
        except TimeoutError:
            if self._reading_head:
                return 0
            raise


#: [bytes] the largest request head accepted (an MCP request's head is a few hundred bytes);
#: a connection whose head grows past it is answered 431 and closed.
HEAD_BUFFER_LIMIT = 64 * 1024
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


#: [seconds] the longest a closing connection drains what its client still sends.
LINGER_TIMEOUT = 2.0
#: [bytes] the most drained from a closing connection before it is closed anyway.
LINGER_DRAIN = 64 * 1024

#: [seconds] how long a worker leaves waiting connections to a less loaded sibling before it
#: looks again.
DEFER_STEP = 0.005
#: [seconds] the longest a worker leaves waiting connections to its siblings: then it takes
#: one itself, so that a sibling slow to look keeps no client waiting.
MAX_DEFER = 0.25


class _Conn(gthread.TConn):
    """gunicorn's connection, with the bytes of its next request's head gathered so far, and
    the worker that lingers on its close."""

    head = b""
    worker: ThreadWorker | None = None
    drained = 0
    linger_until = 0.0
    # A GET runs on a thread: a stream, which the worker's load does not count as busy.
    stream = False

    def close(self, graceful: bool = False) -> None:
        worker = self.worker
        if graceful and worker is not None:
            # Once only: the lingering ends with a plain close.
            self.worker = None
            worker.linger(self)
            return
        super().close(graceful)


def _unreader(conn: gthread.TConn) -> Unreader:
    # The parser of an HTTP/1.1 connection: this worker serves neither HTTP/2 nor uwsgi.
    return cast("RequestParser", conn.parser).unreader


def _whole(head: bytes) -> bool:
    # A blank line ends a head; a bare LF ends it too (gunicorn answers such a head with 400).
    return b"\r\n\r\n" in head or b"\n\n" in head


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's gthread worker with zemcp's limits on silent connections and stalled heads."""

    def init_process(self) -> None:
        settings = Settings.from_env()
        self.head_timeout = settings.head_timeout
        self._lingering: deque[_Conn] = deque()
        # The table of the workers' loads: None without zemcp's gunicorn hooks, or for a worker
        # beyond the table, which then accepts as gunicorn does.
        self._loads = workerloads.mine()
        # A session's requests may be served by another worker only when sessions are shared;
        # a TLS connection cannot change process (its session keys live in this one).
        self._hands_off = self._loads is not None and settings.state_backend != "memory" and not self.cfg.is_ssl
        # The busy connections this worker has room for: as many calls as may wait for answers.
        self._budget = settings.pending_budget
        # GET requests running on threads (streams), which the load does not count as busy.
        self._streams = 0
        # While accepting is deferred: when the deferral ends, when the last one ended, and when
        # this worker began to leave waiting connections to its siblings (0 when it does not).
        self._defer_until = 0.0
        self._last_deferral = 0.0
        self._deferred_since = 0.0
        super().init_process()

    def run(self) -> None:
        """gunicorn's loop, with this worker's inbox of connections handed over by its siblings."""
        if self._hands_off:
            assert self._loads is not None
            inbox = self._loads.inbox
            assert inbox is not None  # a worker with a slot has an inbox
            self.poller.register(inbox, selectors.EVENT_READ, self._on_handed)
        super().run()

    # -- sharing the connections with the sibling workers ---------------------------------

    def _busy(self) -> int:
        # Every connection counts but the idle kept-alive ones and the streams (lingering ones
        # are no longer counted in nr_conns).
        return self.nr_conns - len(self.keepalived_conns) - self._streams

    def _publish(self, now: float) -> None:
        assert self._loads is not None
        if self.alive and self.nr_conns < self.worker_connections:
            load = workerloads.pack(self._busy(), len(self.keepalived_conns))
        else:
            load = workerloads.ABSENT
        self._loads.publish(load, now)

    def _accept_now(self) -> bool:
        """Whether to take a waiting connection now, or leave it to a less loaded sibling a moment."""
        assert self._loads is not None
        now = time.monotonic()
        lowest, _ = self._loads.lowest(now)
        if workerloads.accept_now(workerloads.pack(self._busy(), len(self.keepalived_conns)), lowest):
            self._deferred_since = 0.0
            return True
        if not self._deferred_since or now - self._last_deferral > MAX_DEFER:
            # The listener was quiet for a while since the last deferral: a new wait begins.
            self._deferred_since = now
        elif now - self._deferred_since >= MAX_DEFER:
            self._deferred_since = 0.0
            return True
        self._defer_until = self._last_deferral = now + DEFER_STEP
        super().set_accept_enabled(False)
        return False

    def set_accept_enabled(self, enabled: bool | None) -> None:
        """gunicorn's switch of accepting, which its loop turns on at every turn: kept off while
        this worker leaves waiting connections to a sibling."""
        if enabled and self._defer_until:
            if time.monotonic() < self._defer_until:
                return
            self._defer_until = 0.0
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float | None) -> None:
        """Publish this worker's load (its heartbeat too), then gunicorn's wait for events (no
        longer than a deferral of accepting lasts)."""
        if self._loads is not None:
            now = time.monotonic()
            self._publish(now)
            if self._defer_until:
                timeout = max(0.0, min(timeout if timeout is not None else DEFER_STEP, self._defer_until - now))
        super().wait_for_and_dispatch_events(timeout)

    def _hand_off(self, conn: _Conn) -> bool:
        """Hand ``conn``, whose request head is whole, to the least loaded sibling when this worker
        has its budget of other busy connections and that sibling has room; True when it went."""
        assert self._loads is not None
        busy = self._busy() - 1
        if busy < self._budget:
            return False  # room here: the common case, decided without reading the table
        now = time.monotonic()
        lowest, slot = self._loads.lowest(now)
        if slot is None or not workerloads.hand_to(busy, lowest, self._budget):
            return False
        if not self._loads.hand(slot, conn.sock, conn.head):
            return False
        # The sibling holds the connection now; this process's descriptor of it goes.
        self.nr_conns -= 1
        conn.sock.close()
        self._publish(now)
        return True

    def _on_handed(self, inbox: socket.socket) -> None:
        """A sibling handed this worker a connection with the whole head of its request: serve it."""
        try:
            data, fds, _, _ = socket.recv_fds(
                inbox, workerloads.HANDOFF_BYTES, 1, getattr(socket, "MSG_CMSG_CLOEXEC", 0)
            )
        except OSError:
            return
        if not fds:
            return
        received = socket.socket(fileno=fds[0])
        sock = _HeadLimitedSocket(received.family, received.type, received.proto, fileno=received.detach())
        sock.head_timeout = self.head_timeout
        try:
            peer, local = sock.getpeername(), sock.getsockname()
        except OSError:
            sock.close()
            return
        conn = _Conn(self.cfg, sock, peer, local)
        conn.worker = self
        conn.head = data
        self.nr_conns += 1
        self._serve_head(conn)

    def finish_request(self, conn: gthread.TConn, fs: Future[bool]) -> None:
        """gunicorn's end of a request on a thread (a stream's: it no longer counts)."""
        conn = cast(_Conn, conn)
        if conn.stream:
            conn.stream = False
            self._streams -= 1
        super().finish_request(conn, fs)

    # -- accepting and gathering heads ----------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        """Accept a connection (with siblings, only when this worker is the least loaded, see
        :meth:`_accept_now`); its request head is gathered on the poller, not on a thread."""
        if self._loads is not None and not self._accept_now():
            return
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        if self._loads is not None:
            # At once: the siblings' next choice must count this connection.
            self._publish(time.monotonic())
        sock = _HeadLimitedSocket(client.family, client.type, client.proto, fileno=client.detach())
        sock.head_timeout = self.head_timeout
        conn = _Conn(self.cfg, sock, address, listener.getsockname())
        if not self.cfg.is_ssl:
            # A TLS connection must end with its close_notify, which gunicorn's own close sends.
            conn.worker = self
        if self.cfg.is_ssl:
            # The bytes of a TLS connection can only be read once it is wrapped: gunicorn's way.
            self.enqueue_req(conn)
            return
        self._gather_head(conn)

    def on_client_socket_readable(self, conn: gthread.TConn, client: socket.socket) -> None:
        """A kept-alive connection sends its next request: gather that head on the poller too."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        if self.cfg.is_ssl:
            self.enqueue_req(conn)
            return
        self._gather_head(conn)

    def enqueue_req(self, conn: gthread.TConn) -> None:
        """Hand a connection to a thread, unless it holds only part of its next request's head.

        gunicorn hands a kept-alive connection straight back to a thread when bytes of the next
        request were read with the previous one (pipelining); when those bytes are not a whole
        head yet, the rest is gathered on the poller like any other head.
        """
        unreader = _unreader(conn) if conn.initialized and conn.parser is not None else None
        buffered = unreader.buf.getvalue() if unreader is not None else b""
        if buffered and not _whole(buffered) and not self.cfg.is_ssl:
            assert unreader is not None  # buffered bytes came from it
            unreader.buf.seek(0)
            unreader.buf.truncate()
            conn.sock.setblocking(False)
            self._gather_head(conn, buffered)
            return
        super().enqueue_req(conn)

    def _gather_head(self, conn: gthread.TConn, head: bytes = b"") -> None:
        # Every connection of this worker is a _Conn: accept() makes them.
        conn = cast(_Conn, conn)
        # gunicorn's own pending-connection queue: murder_pending closes it when the time is up.
        conn.head = head
        conn.timeout = time.monotonic() + self.head_timeout
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_head_bytes, conn))

    def _on_head_bytes(self, conn: _Conn, client: socket.socket) -> None:
        """Read what arrived without blocking; once the head is whole, hand the connection to a
        thread, or to a sibling with room when this worker has none (:meth:`_hand_off`)."""
        try:
            chunk = conn.sock.recv(HEAD_BUFFER_LIMIT)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            conn.head += chunk
            if not _whole(conn.head) and len(conn.head) < HEAD_BUFFER_LIMIT:
                return
        self.poller.unregister(client)
        self.pending_conns.remove(conn)
        if not chunk or not _whole(conn.head):
            # The client closed before its head was whole, or the head is too large.
            if chunk:
                with contextlib.suppress(OSError):
                    conn.sock.send(_TOO_LARGE)
            self.nr_conns -= 1
            conn.close()
            return
        if conn.head.lstrip(b"\r\n").startswith(b"GET "):
            conn.stream = True
            self._streams += 1
        elif self._hands_off and self._hand_off(conn):
            return
        self._serve_head(conn)

    def _serve_head(self, conn: _Conn) -> None:
        """Hand ``conn``, whose whole request head was read on the poller, to a thread."""
        conn.init()
        conn.sock.setblocking(False)
        # The parser reads the gathered head first, then the rest from the socket.
        _unreader(conn).unread(conn.head)
        conn.data_ready = True
        super().enqueue_req(conn)

    # -- lingering close on the poller ----------------------------------------------------

    def linger(self, conn: _Conn) -> None:
        """Close ``conn`` the RFC 9112 way without holding the main loop: send FIN now, read and
        drop what the client still sends on the poller, close on its FIN, after
        :data:`LINGER_DRAIN` bytes or after :data:`LINGER_TIMEOUT` seconds."""
        sock = conn.sock
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            self.poller.register(sock, selectors.EVENT_READ, partial(self._on_linger_bytes, conn))
        except (OSError, ValueError, KeyError):
            sock.close()
            return
        conn.linger_until = time.monotonic() + LINGER_TIMEOUT
        self._lingering.append(conn)

    def _on_linger_bytes(self, conn: _Conn, client: socket.socket) -> None:
        try:
            chunk = conn.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        conn.drained += len(chunk)
        if chunk and conn.drained < LINGER_DRAIN:
            return
        self._end_linger(conn)

    def _end_linger(self, conn: _Conn) -> None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.poller.unregister(conn.sock)
        with contextlib.suppress(ValueError):
            self._lingering.remove(conn)
        conn.sock.close()

    def murder_pending(self) -> None:
        """gunicorn's timeouts of connections waiting for a head, and the end of lingering closes."""
        super().murder_pending()
        now = time.monotonic()
        while self._lingering and self._lingering[0].linger_until <= now:
            self._end_linger(self._lingering[0])
