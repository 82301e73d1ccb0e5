"""The reply sink of a session's request run on zemcp's pool: a resumable stream (handshake era).

Its events are kept in the session's :class:`zemcp.state.streamlogs.EventLog`, so that a client
whose connection broke gets them from a GET with ``Last-Event-ID`` (MCP basic/transports,
"Resumability and Redelivery"). Under gunicorn :class:`zemcp.replies.direct.DirectSink` does this
on the request's own thread instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zemcp.replies.encoding import encode
from zemcp.replies.sinks import ReplySink
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from zemcp.protocol.jsonrpc import RequestId
    from zemcp.state.streamlogs import EventLog, StreamLogs


class ResumableReplySink(ReplySink):
    """A :class:`zemcp.replies.sinks.ReplySink` whose stream is resumable (handshake era, a handler on
    zemcp's pool): its events go to an :class:`zemcp.state.streamlogs.EventLog` of the session, which
    the request's response reads (:class:`zemcp.replies.streams.LogStream`) and a resuming GET can read after it.

    Args:
        streams: the session's streams.
        request_id: the id of the request the stream answers.
    """

    def __init__(self, streams: StreamLogs, request_id: RequestId | None = None):
        super().__init__()
        self.streams = streams
        self._request_id = request_id
        self.log: EventLog | None = None
        self.token = 0
        self.priming = b""

    def _open(self) -> EventLog:
        # Called with the condition held: the stream starts with its priming event.
        if self.log is None:
            self.log, self.token, self.priming = self.streams.open_reading(self._request_id)
            self._streaming = True
            self._cond.notify_all()
        return self.log

    def send(self, message: dict[str, Any]) -> bool:
        """Add a message that precedes the response to the stream (upgrades the response).

        Returns:
            False when the request finished or its client was gone past the resumption window.
        """
        with self._cond:
            if self._closed or self._finished:
                return False
            log = self._open()
            give_up = log.abandoned()
            if not give_up:
                log.append(encode(message))
        if give_up:
            self.close()
            return False
        return True

    def finish(self, response: dict[str, Any] | None) -> None:
        """Give the final response (``None``: cancelled); it ends the stream when there is one."""
        with self._cond:
            if self._finished:
                return
            self._finished = True
            self._final = response
            if self.log is not None:
                self.log.finish(encode(response) if response is not None else None)
                self.streams.ended(self.log)
            self._cond.notify_all()

    def end_stream(self) -> None:
        """End the client's current connection with a ``retry`` field (SSE polling); the
        handler goes on and the client resumes with ``Last-Event-ID``."""
        with self._cond:
            if self._closed or self._finished:
                return
            log = self._open()
        log.end_connection()

    def tick(self) -> None:
        """While the handler waits: give up on a client gone longer than the resumption window."""
        log = self.log
        try:
            gone = log is not None and log.abandoned()
        except StateUnavailable:
            gone = False  # the shared state cannot tell now: keep waiting
        if gone:
            self.close()
