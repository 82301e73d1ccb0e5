"""The correlation table: server-to-client requests waiting for the client's response.

MCP basic/transports: the client answers a request the server sent on an SSE stream with a
separate POST. This process-local table matches that answer to the waiting handler by
(session id, request id). A waiter blocks on a ``threading.Condition`` that shares the
table's lock, so resolving one entry wakes only its own thread. Entries of another session
can never be reached: the key includes the session of the answering POST.

This is the in-process implementation of :class:`zemcp.state.waitingcalls.WaitingCalls`.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zemcp.protocol import jsonrpc
from zemcp.state.shares import Shares, client_label
from zemcp.state.waitingcalls import CapacityError, Delivery, Withdrawal

if TYPE_CHECKING:
    from zemcp.state.waitingcalls import Identified, RunningCall


#: [seconds] how often a waiting handler lets its reply sink tick (keep-alives, a client gone).
TICK = 1.0


class Pending:
    """One outstanding server-to-client request.

    Attributes:
        id: the JSON-RPC id sent to the client (a string unique in this process).
        session_id: the session it was sent in.
        call: the client request whose handler is waiting.
    """

    __slots__ = ("id", "session_id", "call", "_cond", "_outcome")

    def __init__(self, id: str, session_id: str, call: RunningCall, lock: threading.Lock):
        self.id = id
        self.session_id = session_id
        self.call = call
        self._cond = threading.Condition(lock)
        self._outcome: jsonrpc.Response | BaseException | None = None


class CorrelationTable:
    """Pending server-to-client requests of one process, keyed by (session id, request id).

    Args:
        max_pending: entries the process may hold at once.
        max_per_session: entries one session may hold at once.
        client_share: the share of ``max_pending`` one client (``call.client_key``) may hold
            (``Settings.client_share``; 1 lets one client take them all).
    """

    def __init__(self, max_pending: int, max_per_session: int, client_share: float = 1.0):
        self.max_pending = max_pending
        self.max_per_session = max_per_session
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Pending] = {}
        self._per_session: Counter[str] = Counter()
        self._per_client = Shares(max_pending, client_share, "pending elicitations")
        # The entries of each call (by its id(), which its entries keep alive), so that ending
        # one call looks at its own entries only.
        self._by_call: dict[int, list[Pending]] = {}

    def register(self, session: Identified, call: RunningCall) -> Pending:
        """Reserve a slot and an id for a new request of ``call``.

        Raises:
            CapacityError: the session's, the client's or the process's cap is reached.
        """
        client = call.client_key
        with self._lock:
            if self._per_session[session.id] >= self.max_per_session:
                raise CapacityError(f"this session already has {self.max_per_session} (the per-session cap)")
            if len(self._entries) >= self.max_pending:
                raise CapacityError(
                    f"this process already has {self.max_pending} (the process cap, derived from the thread budget)"
                )
            if client is not None and self._per_client.full(client):
                raise CapacityError(
                    f"this client ({client_label(client)}) already has {self._per_client.held(client)} of the "
                    f"process's {self.max_pending}, its fair share (ZEMCP_CLIENT_SHARE)"
                )
            # Random, so an id tells a session nothing about the requests of other sessions.
            pending = Pending(f"zemcp-{secrets.token_urlsafe(12)}", session.id, call, self._lock)
            self._entries[(session.id, pending.id)] = pending
            self._by_call.setdefault(id(call), []).append(pending)
            self._per_session[session.id] += 1
            self._per_client.take(client)
            return pending

    def resolve(self, session_id: str, answer: jsonrpc.Response) -> Delivery:
        """Hand the client's response to the waiter of (``session_id``, ``answer.id``).

        Returns:
            ``Delivery.TAKEN`` if a waiter took it; ``Delivery.NOT_WAITING`` for an unknown id,
            an id of another session, or an entry already resolved or ended (all alike, so
            that ids cannot be probed).
        """
        if not isinstance(answer.id, str):
            return Delivery.NOT_WAITING
        with self._lock:
            pending = self._entries.get((session_id, answer.id))
            if pending is None or pending._outcome is not None:
                return Delivery.NOT_WAITING
            pending._outcome = answer
            pending._cond.notify()
            return Delivery.TAKEN

    def end_session(self, session_id: str, reason: BaseException) -> int:
        """End every unresolved wait of the session ``session_id``; each waiter raises ``reason``.

        Returns:
            how many waits were ended.
        """
        return self._abandon(lambda pending: pending.session_id == session_id, reason)

    def end_call(self, call: RunningCall, reason: BaseException) -> int:
        """End every unresolved wait of ``call``; each waiter raises ``reason``.

        Returns:
            how many waits were ended.
        """
        ended = 0
        with self._lock:
            for pending in self._by_call.get(id(call), ()):
                if pending._outcome is None:
                    pending._outcome = reason
                    pending._cond.notify()
                    ended += 1
        return ended

    def _abandon(self, match: Callable[[Pending], bool], reason: BaseException) -> int:
        """End every unresolved wait for which ``match`` is true; each waiter raises ``reason``.

        Returns:
            how many waits were ended.
        """
        ended = 0
        with self._lock:
            for pending in self._entries.values():
                if pending._outcome is None and match(pending):
                    pending._outcome = reason
                    pending._cond.notify()
                    ended += 1
        return ended

    def wait(self, pending: Pending, timeout: float) -> jsonrpc.Response:
        """Block until ``pending`` is resolved or abandoned.

        Every ``tick_interval`` of the call's reply sink (at most ``TICK``) the wait lets the
        sink tick, outside the lock: a sink written from this thread then sends its keep-alive comments and notices
        a client that left (which abandons the wait).

        Args:
            pending: an entry from :meth:`register`.
            timeout: [seconds] the longest wait.
        Returns:
            the client's response.
        Raises:
            TimeoutError: nothing arrived in time.
            the reason given to :meth:`end_session` or :meth:`end_call`.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                remaining = deadline - time.monotonic()
                tick = pending.call.sink.tick_interval
                if pending._cond.wait_for(lambda: pending._outcome is not None, max(0.0, min(tick, remaining))):
                    outcome = pending._outcome
                    break
                if remaining <= tick:
                    pending._outcome = TimeoutError()
                    raise TimeoutError()
            pending.call.sink.tick()
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None  # the wait ended on an outcome
        return outcome

    def ask_all(
        self,
        call: RunningCall,
        requests: list[tuple[str, dict[str, Any]]],
        timeout: float,
        withdrawal: Withdrawal | None = None,
    ) -> list[jsonrpc.Response]:
        """Send requests to the client on ``call``'s stream, all at once, and wait for every response.

        When the wait ends without every response (timeout, cancelled call, ended session),
        the client is told with ``notifications/cancelled`` for each unanswered request, as
        the spec asks of a sender that stops waiting, so it can close its prompts.

        Args:
            call: the client request whose handler asks; its reply sink carries the requests.
            requests: ``(method, params)`` pairs (``elicitation/create``, ``sampling/createMessage`` ...).
            timeout: [seconds] the longest wait for all of them together.
            withdrawal: when withdrawn (before or during the wait), the waits end with its
                reason, whose text the ``notifications/cancelled`` carry.
        Returns:
            the client's responses (result or error), in the order of ``requests``.
        Raises:
            CapacityError: a cap is reached, or ``requests`` are more than the per-session
                or the process cap allows at once; nothing was sent.
            TypeError, ValueError: params hold a value JSON cannot carry; nothing was sent.
            TimeoutError: not every response arrived in time.
            the call's abort reason (request cancelled, session ended, client disconnected),
            or the withdrawal's.
        """
        for cap, which in ((self.max_per_session, "per-session"), (self.max_pending, "process")):
            if len(requests) > cap:
                # Counted against the empty table, the message would blame pending requests that do not exist.
                raise CapacityError(
                    f"this request asks for {len(requests)} at once, and the {which} cap is {cap}",
                    f"ask for at most {cap} at once",
                )
        pendings: list[Pending] = []
        try:
            for _ in requests:
                pendings.append(self.register(call.session, call))
            # An abort that landed before register() found no entry to end.
            call.raise_if_aborted()
            if withdrawal is not None:
                withdrawal.attach(lambda reason: self._abandon(lambda pending: pending in pendings, reason))
            messages = [jsonrpc.request(p.id, method, params) for p, (method, params) in zip(pendings, requests)]
            for message in messages:
                # Fail now, not after the timeout, when the params cannot be sent as JSON.
                jsonrpc.encode(message)
            for message in messages:
                call.sink.send(message)
            deadline = time.monotonic() + timeout
            answers: list[jsonrpc.Response] = []
            try:
                for pending in pendings:
                    answers.append(self.wait(pending, max(0.0, deadline - time.monotonic())))
            except BaseException as exc:
                reason = "no response within the timeout" if isinstance(exc, TimeoutError) else str(exc)
                for pending in pendings[len(answers) :]:
                    call.sink.send(
                        jsonrpc.notification("notifications/cancelled", {"requestId": pending.id, "reason": reason})
                    )
                raise
            return answers
        finally:
            for pending in pendings:
                self.discard(pending)

    def discard(self, pending: Pending) -> None:
        """Free the slot of ``pending`` (always call it when the wait is over)."""
        with self._lock:
            if self._entries.pop((pending.session_id, pending.id), None) is not None:
                of_call = self._by_call[id(pending.call)]
                of_call.remove(pending)
                if not of_call:
                    del self._by_call[id(pending.call)]
                self._per_client.give(pending.call.client_key)
                self._per_session[pending.session_id] -= 1
                if not self._per_session[pending.session_id]:
                    del self._per_session[pending.session_id]

    def count(self, session_id: str | None = None) -> int:
        """Pending entries of one session, or of the whole process when ``session_id`` is None."""
        with self._lock:
            return len(self._entries) if session_id is None else self._per_session[session_id]
