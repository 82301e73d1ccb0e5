"""Reply sinks: where a request's handler puts what goes back to the client.

MCP basic/transports (Streamable HTTP, "Sending Messages to the Server"): a request is
answered either with one ``application/json`` body or with a ``text/event-stream`` that
first carries the server's requests and notifications related to it, then the response.

A :class:`ReplySink` lets the handler's thread decide that late: the HTTP side waits in
:meth:`ReplySink.first` until the handler either finishes (plain JSON response) or sends
something before finishing (the response becomes a stream, the "in-place upgrade"). From then
on the HTTP side drains frames with :meth:`ReplySink.frames`. Pure threading, no HTTP.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from zemcp.state.streamlogs import KEEPALIVE


class CloseCallbacks:
    """Callbacks run once when a reply's reader is gone (shared by the reply sinks)."""

    def __init__(self) -> None:
        self._close_lock = threading.Lock()
        self._closed = False
        self._on_close: list[Callable[[], object]] = []

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once when :meth:`close` is called (at once if it already was)."""
        with self._close_lock:
            if not self._closed:
                self._on_close.append(callback)
                return
        callback()

    def close(self) -> None:
        """The reader is gone (response sent, or client disconnected); run the callbacks once."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


class ReplySink(CloseCallbacks):
    """The output of one client request, handed from the handler thread to the HTTP thread."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._frames: deque[dict[str, Any]] = deque()
        self._streaming = False
        self._finished = False
        self._final: dict[str, Any] | None = None

    def send(self, message: dict[str, Any]) -> bool:
        """Queue a server-to-client message that precedes the response; upgrades to a stream.

        Returns:
            False when the reader is gone (the message is dropped), else True.
        """
        with self._cond:
            if self._closed or self._finished:
                return False
            self._streaming = True
            self._frames.append(message)
            self._cond.notify()
            return True

    def finish(self, response: dict[str, Any] | None) -> None:
        """Give the final response (``None``: the request was cancelled, send no response)."""
        with self._cond:
            if self._finished:
                return
            self._finished = True
            self._final = response
            self._cond.notify()

    def first(self) -> tuple[bool, dict[str, Any] | None]:
        """Wait until the reply's form is known.

        Returns:
            ``(False, response)`` when the handler finished without sending anything first:
            answer with plain JSON (``response`` is None for a cancelled request);
            ``(True, None)`` when the reply became a stream: drain it with :meth:`frames`.
        """
        with self._cond:
            self._cond.wait_for(lambda: self._streaming or self._finished)
            return (True, None) if self._streaming else (False, self._final)

    def frames(self, keepalive: float) -> Iterator[object]:
        """Yield queued messages, then the final response, as they come.

        Args:
            keepalive: [seconds] after this long with nothing to send, yield :data:`KEEPALIVE`
                so the caller writes an SSE comment (which also finds a vanished client).
        Yields:
            message dicts, or :data:`KEEPALIVE`; ends after the final response (a cancelled
            request ends without one).
        """
        while True:
            last = False
            with self._cond:
                if not self._cond.wait_for(lambda: self._frames or self._finished, keepalive):
                    item: object = KEEPALIVE
                elif self._frames:
                    item = self._frames.popleft()
                else:
                    item, last = self._final, True
            if last:
                if item is not None:
                    yield item
                return
            yield item

    #: [seconds] how often a waiting handler calls :meth:`tick` (it has nothing to do here).
    tick_interval = 1.0

    def tick(self) -> None:
        """Nothing to do: the request's own thread writes keep-alives while it drains this sink."""

    @property
    def finished(self) -> bool:
        """True once the final response (or its absence) was given."""
        return self._finished
