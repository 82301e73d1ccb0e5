"""A handshake-era request whose handler is running: its exchange with the client.

MCP basic/transports (Streamable HTTP): a server-to-client request related to a client
request goes out on that request's SSE stream, and the client POSTs its answer separately; the
handler's thread waits for it in the process's correlation table
(:class:`zemcp.state.waitingcalls.WaitingCalls`). A :class:`Call` is the
:class:`zemcp.core.exchange.Exchange` of such a request.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from zemcp.core.exchange import Abortable
from zemcp.protocol.elicitation import RequestCancelled
from zemcp.protocol.jsonrpc import RequestId
from zemcp.state.session import Session

if TYPE_CHECKING:
    from zemcp.protocol import jsonrpc
    from zemcp.protocol.inputs import InputRequest
    from zemcp.replies.direct import DirectSink
    from zemcp.replies.sinks import ReplySink
    from zemcp.state.waitingcalls import WaitingCalls, Withdrawal


#: [seconds] how long a server-to-client request of a session waits for the client's
#: ``notifications/initialized`` before it is sent anyway (see :meth:`Session.wait_initialized`).
INITIALIZED_GRACE = 0.5


class Call(Abortable):
    """A handshake-era client request whose handler is running: its
    :class:`zemcp.core.exchange.Exchange`, which pushes input requests on the request's stream.

    Args:
        session: the session it belongs to.
        request_id: its JSON-RPC id.
        sink: where its output goes.
        progress_token: the request's ``_meta.progressToken``, or None.
        table: the process's correlation table, where the handler waits for answers.
        timeout: [seconds] the longest wait for the answers to one :meth:`ask`.
        can_wait: False under a WSGI server that is not multithreaded: the answer, a request
            of its own, could not be served while this one waits.
        client_key: whose fair shares its pending requests count in, or None (stdio).

    Attributes:
        session, request_id, sink, progress_token, timeout, can_wait, client_key: as given;
            ``client`` is the session.
        aborted: why it can no longer be answered, or None.
        asked: True once it asked the client something (only then can it wait in the table).
    """

    asked = False

    def __init__(
        self,
        session: Session,
        request_id: RequestId,
        sink: ReplySink | DirectSink,
        progress_token: RequestId | None = None,
        table: WaitingCalls | None = None,
        timeout: float = 600.0,
        can_wait: bool = True,
        client_key: str | None = None,
    ):
        super().__init__()
        self.session = session
        self.client = session
        self.request_id = request_id
        self.sink = sink
        self.progress_token = progress_token
        self._table = table
        self.timeout = timeout
        self.can_wait = can_wait
        self.client_key = client_key

    def ask(
        self, requests: list[InputRequest], timeout: float | None = None, withdrawal: Withdrawal | None = None
    ) -> list[jsonrpc.Response]:
        """Send ``requests`` on this call's stream and wait for every answer (see
        :meth:`zemcp.state.waitingcalls.WaitingCalls.ask_all`).

        Nothing is sent before the client's ``notifications/initialized``, for up to
        :data:`INITIALIZED_GRACE` (:meth:`Session.wait_initialized`); that wait counts in
        ``timeout``.

        Args:
            requests: the questions.
            timeout: [seconds] the longest wait for all the answers, at most
                :attr:`timeout` (which None means).
            withdrawal: withdraws the requests and ends the wait when withdrawn.
        Raises:
            as :meth:`zemcp.state.waitingcalls.WaitingCalls.ask_all`.
        """
        if self._table is None:
            raise RuntimeError("this call was made without a correlation table and cannot ask the client")
        # Before the table holds anything of it: an abort from now on ends its waits there.
        self.asked = True
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        start = time.monotonic()
        self.session.wait_initialized(min(INITIALIZED_GRACE, limit))
        remaining = max(0.0, limit - (time.monotonic() - start))
        return self._table.ask_all(self, [(r.method, r.params) for r in requests], remaining, withdrawal)

    def notify(self, message: dict[str, Any]) -> None:
        """Queue a notification on the call's stream (raises the abort reason once aborted)."""
        self.raise_if_aborted()
        self.sink.send(message)

    def end_stream(self) -> None:
        """End the client's connection to this request's stream on purpose (SSE polling); the
        client resumes it with ``Last-Event-ID``. Nothing happens where streams are not
        resumable (stdio)."""
        end = getattr(self.sink, "end_stream", None)
        if end is not None:
            end()

    def show_status(self, message: str) -> None:
        """Nothing to do: a call that is not a task has no status to show."""

    def note_missing(self, required: dict[str, Any]) -> None:
        """Nothing to do: the handshake era has no error for a missing capability; the handler
        gets ``ElicitUnsupported`` or ``CapabilityMissing`` and decides."""

    @property
    def cancelled(self) -> bool:
        """True when the client sent ``notifications/cancelled`` for this request."""
        return isinstance(self.aborted, RequestCancelled)
