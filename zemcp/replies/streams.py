"""Event-stream bodies (MCP basic/transports, Streamable HTTP): the SSE bytes of one connection.

:class:`SinkStream` writes the events of a pool-fed :class:`zemcp.replies.sinks.ReplySink`,
:class:`LogStream` those of a resumable stream's :class:`zemcp.state.streamlogs.EventLog` (the
request's own connection, or a resuming GET). Both write keep-alive comments while the stream
waits, and end when the client left, which :class:`PeerWatch` tells from its socket.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from zemcp.replies.encoding import encode
from zemcp.replies.sinks import ReplySink
from zemcp.state.streamlogs import KEEPALIVE, retry_field

if TYPE_CHECKING:
    from zemcp.state.streamlogs import EventLog

#: The headers of every event-stream response besides its type: never cached, never buffered by nginx.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: [seconds] how often a quiet stream looks whether its client is still there, whatever the
#: keep-alive interval: a stream the client left gives its thread (and its slot) back this soon.
PEER_CHECK_INTERVAL = 1.0
#: [seconds] how long a polling connection (:class:`LogStream` ``once``) waits for more events.
ONCE_TICK = 0.05


class SinkStream:
    """The body of an upgraded response: SSE events from a reply sink, keep-alive comments
    between them, and the sink closed when the server closes the body (PEP 3333), also when
    nothing was ever read from it."""

    def __init__(self, sink: ReplySink, environ: dict[str, Any], keepalive: float):
        self._sink = sink
        self._keepalive = keepalive
        # gunicorn hands us the client socket; peeking at it finds a client that left
        # before the next keep-alive write would (a write to a closed peer succeeds once).
        client = environ.get("gunicorn.socket")
        self._peer = PeerWatch(client) if client is not None else None

    def __iter__(self) -> Iterator[bytes]:
        # Without the socket to peek at, only a failing write tells: tick at the keep-alive rate.
        peer = self._peer
        tick = min(PEER_CHECK_INTERVAL, self._keepalive) if peer is not None else self._keepalive
        last_write = time.monotonic()
        for item in self._sink.frames(tick):
            if item is KEEPALIVE:
                seen = peer.look() if peer is not None else OPEN
                if seen == GONE:
                    return
                if seen == OPEN and time.monotonic() - last_write < self._keepalive:
                    continue
                yield b": keep-alive\n\n"
            else:
                yield b"event: message\ndata: " + encode(cast("dict[str, Any]", item)) + b"\n\n"
            if peer is not None:
                peer.wrote()
            last_write = time.monotonic()

    def close(self) -> None:
        """The server is done with the body (PEP 3333): the sink's reader is gone."""
        self._sink.close()


class LogStream:
    """The body of a connection that reads a resumable stream (:class:`zemcp.state.streamlogs.EventLog`):
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
        peer = PeerWatch(client) if client is not None else None
        for item in log.read(self._token, self._after, tick):
            now = time.monotonic()
            if item is KEEPALIVE:
                if limit and now - opened >= limit:
                    yield retry_field(log.limits)
                    return
                seen = peer.look() if peer is not None else OPEN
                if seen == GONE:
                    return
                if seen == OPEN and now - last_write < self._keepalive:
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
            if peer is not None:
                peer.wrote()
            last_write = now

    def close(self) -> None:
        """The server is done with the body (PEP 3333): the connection no longer reads the stream."""
        self._log.detach(self._token)
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def _writable(sock: socket.socket, timeout: float | None) -> bool:
    """True when ``sock`` can take bytes within ``timeout`` seconds (None: wait as long as it takes)."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLOUT)
        return bool(poller.poll(None if timeout is None else timeout * 1000))
    except (ValueError, OSError):
        return True  # the write itself will tell


class PeerWatch:
    """What a quiet stream can tell of its client from the client's socket: there, gone, or to be probed.

    A client may shut down only its sending side once its request is sent (HTTP/1.1 allows
    it): its socket then reads as ended, exactly as when it closed the connection. Only a
    write tells the two apart: a closed peer answers it with a reset, which the next look
    finds (the socket reports an error and a hang-up); a half-closed one takes it. So an end of stream asks for a probe (a keep-alive
    comment) until something was written after it; the end of stream seen after that write
    is a half-close, after which only a reset or a failed write counts as gone.

    Args:
        sock: the client socket (``environ["gunicorn.socket"]``).
    """

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._ended = False
        self._probed = False

    def look(self) -> str:
        """:data:`OPEN`, :data:`GONE`, or :data:`PROBE` (write a keep-alive comment now, and
        call :meth:`wrote`). A TLS socket, which cannot peek, is :data:`OPEN`: the next
        keep-alive write tells."""
        # poll(), unlike select(), takes descriptors above 1024.
        poller = select.poll()
        try:
            poller.register(self._sock, select.POLLIN)
            events = poller.poll(0)
            if not events:
                return OPEN
            if events[0][1] & (select.POLLERR | select.POLLHUP):
                # A reset (the answer of a closed peer to a write): the end of stream reads the same.
                return GONE
            if self._sock.recv(1, socket.MSG_PEEK) != b"":
                # Bytes the client sent and nobody read yet are no close.
                return OPEN
        except ValueError:
            return OPEN
        except OSError:
            return GONE
        self._ended = True
        return OPEN if self._probed else PROBE

    def wrote(self) -> None:
        """Bytes went out to the client: after an end of stream, they are the probe."""
        self._probed = self._ended


#: :meth:`PeerWatch.look`: the client is there (as far as its socket tells).
OPEN = "open"
#: :meth:`PeerWatch.look`: the client closed the connection, or it failed.
GONE = "gone"
#: :meth:`PeerWatch.look`: the client's side reads as ended: write a keep-alive now to tell a
#: closed connection from a half-closed one.
PROBE = "probe"
