"""A loopback TCP relay that can cut every connection through it at once (fault injection).

``Relay(port)`` listens on a free 127.0.0.1 port and forwards each connection to
127.0.0.1:``port`` byte for byte; :meth:`Relay.drop` closes every connection open now (both
sides), as a network failure would, while new connections keep working. Used to drop a
client's connections in the middle of a call. Stop it with :meth:`Relay.stop` (or use it as
a context manager).
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.net import HOST, free_port


class Relay:
    """Forward 127.0.0.1:``self.port`` to 127.0.0.1:``target``.

    Attributes:
        port: the relay's own port.
        accepted: connections accepted so far.
        dropped: connections cut by :meth:`drop` so far.
    """

    def __init__(self, target: int):
        self.target = target
        self.port = free_port()
        self.accepted = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener = socket.create_server((HOST, self.port))
        self._listener.settimeout(0.2)
        self._running = True
        self._thread = threading.Thread(target=self._accept, name="relay-accept", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The MCP endpoint through the relay."""
        return f"http://{HOST}:{self.port}/mcp"

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), name="relay-pump", daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def drop(self) -> int:
        """Cut every open connection (both sides closed at once); returns how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        with self._lock:
            self.dropped += len(pairs)
        return len(pairs)

    def stop(self) -> None:
        """Stop listening and cut every connection."""
        self._running = False
        self._listener.close()
        self._thread.join(timeout=2)
        self.drop()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
