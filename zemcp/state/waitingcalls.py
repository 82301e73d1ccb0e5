"""The waiting-calls seam: server-to-client requests whose handlers wait for the client's answer.

A handler of a session asks the client (elicitation, sampling, roots: MCP
client/elicitation, client/sampling, client/roots) by sending a request on its call's stream
and waiting for the JSON-RPC response, which the client POSTs on another connection, perhaps
to another process. :class:`WaitingCalls` keeps those requests by (session id, request id),
hands each answer to its waiter (:class:`Delivery` says what became of it), and wakes the
waiters of a cancelled call or an ended session (in-process:
:class:`zemcp.state.correlation.CorrelationTable`; Redis:
:class:`zemcp.state.redis.waiting.RedisWaitingCalls`). The waiting thread always stays in the
process that runs the call.

Also here, as the table sees them: the running call (:class:`RunningCall`), its session
(:class:`Identified`) and its reply sink (:class:`Outlet`); :class:`Withdrawal`, how an ask
nobody awaits any more is withdrawn; :class:`CapacityError`, the pending caps.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from zemcp.protocol import jsonrpc
    from zemcp.protocol.elicitation import ElicitAborted


class Outlet(Protocol):
    """Where a running request's messages go (its reply sink), as a waiting call uses it.

    Attributes:
        tick_interval: [seconds] how often a waiting handler lets the sink :meth:`tick`.
    """

    tick_interval: float

    def send(self, message: dict[str, Any]) -> bool:
        """Queue one JSON-RPC message on the request's stream; False when nobody reads it any more."""

    def tick(self) -> None:
        """Let the sink do its periodic work on the waiting thread (keep-alives, a client gone)."""


class Identified(Protocol):
    """Anything with a session id (a session record, as the waiting-calls table sees it)."""

    @property
    def id(self) -> str: ...


class RunningCall(Protocol):
    """A running request of a session, as sessions and the waiting-calls table see it
    (:class:`zemcp.eras.handshake.call.Call`).

    Attributes:
        session: the session it belongs to.
        request_id: its JSON-RPC id.
        sink: where its messages go.
        client_key: whose fair shares it counts in (:func:`zemcp.state.shares.client_key`),
            or None (stdio: one client, no shares).
    """

    @property
    def session(self) -> Identified: ...

    @property
    def sink(self) -> Outlet: ...

    request_id: jsonrpc.RequestId
    client_key: str | None

    def abort(self, reason: ElicitAborted) -> bool:
        """Mark it as one that can no longer be answered; True if this set the reason."""

    def raise_if_aborted(self) -> None:
        """Raise the abort reason, if any."""


class Withdrawal:
    """Lets another thread withdraw the requests of one :meth:`WaitingCalls.ask_all` at once,
    before or while it waits (an ``async def`` handler stopped awaiting them): the table
    :meth:`attach` es the end of its waits, and :meth:`withdraw` ends them with its reason,
    so that ``ask_all`` sends ``notifications/cancelled`` for each and frees the thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reason: BaseException | None = None
        self._end: Callable[[BaseException], object] | None = None

    def attach(self, end: Callable[[BaseException], object]) -> None:
        """``end(reason)`` ends the registered waits; raises the reason if already withdrawn."""
        with self._lock:
            self._end, reason = end, self.reason
        if reason is not None:
            raise reason

    def withdraw(self, reason: BaseException) -> None:
        """End the waits with ``reason`` (its text is the ``notifications/cancelled`` reason)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason, end = reason, self._end
        if end is not None:
            end(reason)


class CapacityError(Exception):
    """A cap on pending server-to-client requests is reached; the message names the cap and its value.

    Attributes:
        advice: what the handler can do about it, for the message it gets.
    """

    def __init__(self, message: str, advice: str = "answer or cancel the pending ones first"):
        super().__init__(message)
        self.advice = advice


class Delivery(enum.Enum):
    """The outcome of handing one answer to the waiting calls.

    A :class:`Delivery` is true only for :attr:`TAKEN`, so ``if resolve(...)`` reads as "the
    waiting call has it".
    """

    #: The waiting request has the answer: its handler goes on with it.
    TAKEN = "taken"
    #: No request of that session waits for that id: never sent in the session (another
    #: session's, unknown, not a string), answered already, timed out, cancelled or ended, or
    #: its process is known to be gone. The answer was not used; the session goes on.
    NOT_WAITING = "not waiting"
    #: (Redis) A request waited in another process, which did not confirm within
    #: :data:`zemcp.state.redis.waiting.HANDOVER_TIMEOUT` that it took the answer: it died
    #: (its heartbeat has not lapsed yet) or stalls. The answer was not used, and no request
    #: waits for that id any more; the call it belonged to ends with an error.
    UNCONFIRMED = "unconfirmed"

    def __bool__(self) -> bool:
        return self is Delivery.TAKEN


class WaitingCalls(Protocol):
    """Server-to-client requests whose handler waits for the client's answer (the correlation table).

    Attributes:
        max_pending: requests waiting at once at most, in this process.
        max_per_session: requests of one session waiting at once at most.
    """

    max_pending: int
    max_per_session: int

    def ask_all(
        self,
        call: RunningCall,
        requests: list[tuple[str, dict[str, Any]]],
        timeout: float,
        withdrawal: Withdrawal | None = None,
    ) -> list[jsonrpc.Response]:
        """Send ``(method, params)`` requests on ``call``'s stream and wait for every answer.

        Args:
            timeout: [seconds] the longest wait for all of them together.
            withdrawal: ends the wait early with its reason when withdrawn.
        Returns:
            the client's responses, in the order of ``requests``.
        Raises:
            CapacityError: a cap is reached, or ``requests`` are more than a cap allows at
                once; nothing was sent.
            TypeError, ValueError: params hold a value JSON cannot carry; nothing was sent.
            TimeoutError: not every answer arrived in time.
            the call's abort reason (request cancelled, session ended, client disconnected),
            or the withdrawal's.
        """

    def resolve(self, session_id: str, answer: jsonrpc.Response) -> Delivery:
        """Hand the client's answer to its request; what became of it (an id of another session is NOT_WAITING)."""

    def end_session(self, session_id: str, reason: BaseException) -> int:
        """Wake every request of the session that waits, with ``reason``; returns how many."""

    def end_call(self, call: RunningCall, reason: BaseException) -> int:
        """Wake every request of ``call`` that waits, with ``reason``; returns how many."""

    def count(self, session_id: str | None = None) -> int:
        """Requests waiting, in one session or (None) in the whole process."""
