"""The exchange: how a running handler talks to the client, whatever the era.

A handler's :class:`zemcp.Context` talks through the request's :class:`Exchange`, the only
era-specific piece a handler touches: :class:`zemcp.eras.handshake.call.Call` pushes each
question on the request's stream and waits for the answer (2024-11-05 to 2025-11-25);
:class:`zemcp.eras.modern.mrtr.Round` answers from what earlier rounds recorded and ends the
round at the first question without an answer (2026-07-28, SEP-2322), by raising a
:class:`RoundEnded`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from zemcp.observe.telemetry import NULL_OPERATION, Operation

if TYPE_CHECKING:
    from collections.abc import Callable

    from zemcp.protocol import jsonrpc
    from zemcp.protocol.capabilities import ClientView
    from zemcp.protocol.elicitation import ElicitAborted
    from zemcp.protocol.inputs import InputRequest
    from zemcp.state.session import Session
    from zemcp.state.waitingcalls import Withdrawal


class RoundEnded(BaseException):
    """The round ends before the handler returns (2026-07-28 multi-round-trip requests).

    Not an ``Exception``, so a handler's ``except Exception`` lets it through;
    :meth:`zemcp.core.server.Server.execute` lets it through to the era, which answers with
    what the round gathered. The era's exchange also remembers it, so a handler that
    swallows it anyway still gets the round's proper answer.
    """


class Abortable:
    """Whether a running request can still be answered, for the exchanges of both eras.

    The first abort reason wins; what watches the request (an ``async def`` handler's task,
    which is cancelled so) is told once, at the abort.

    Attributes:
        aborted: why the request can no longer be answered, or None.
        operation: the telemetry operation of the request the exchange serves (the era sets
            it from the request's context); a task's runs have none.
        site_request: the framework's request the exchange serves (the era sets it from the
            request's context); None without a framework view, and in a task.
        ending: the exception that ended the handler instead of a return (an outcome of
            asking the client, an abort, or what the handler raised), noted by the tool that
            ran it (:meth:`zemcp.core.tools.Tool.run`) for the audit record; None otherwise.
    """

    operation: Operation = NULL_OPERATION
    site_request: Any = None
    ending: BaseException | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.aborted: ElicitAborted | None = None
        self._watchers: list[Callable[[BaseException], object]] = []

    def abort(self, reason: ElicitAborted) -> bool:
        """Mark the request as one that can no longer be answered (first reason wins), and
        tell what watches it (:meth:`on_abort`).

        Returns:
            True if this call set the reason.
        """
        with self._lock:
            if self.aborted is not None:
                return False
            self.aborted = reason
            watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher(reason)
        return True

    def on_abort(self, callback: Callable[[BaseException], object]) -> Callable[[], None]:
        """Run ``callback(reason)`` once when the request is aborted, at once if it was.

        Returns:
            the function that stops watching.
        """
        with self._lock:
            reason = self.aborted
            if reason is None:
                self._watchers.append(callback)
        if reason is not None:
            callback(reason)

        def stop() -> None:
            with self._lock:
                if callback in self._watchers:
                    self._watchers.remove(callback)

        return stop

    def raise_if_aborted(self) -> None:
        """Raise the abort reason, if any (checked before a new question is sent)."""
        if self.aborted is not None:
            raise self.aborted


class Exchange(Protocol):
    """How one client request talks to the client while its handler runs.

    Attributes:
        client: what the request declared (version, capabilities, log level).
        session: the handshake-era session, or None in the stateless era.
        request_id: the JSON-RPC id of the request.
        progress_token: its ``_meta.progressToken``, or None.
        timeout: [seconds] (handshake) the longest wait for the answers to one :meth:`ask`.
        can_wait: False when :meth:`ask` would wait for an answer that cannot arrive (a
            handshake-era request under a WSGI server that is not multithreaded).
        operation: the telemetry operation of the request (its span is current while the
            handler runs; its questions are CLIENT spans of it).
        site_request: the framework's request (``ctx.request``), or None.
        ending: the exception that ended the handler instead of a return, or None
            (:attr:`Abortable.ending`).
    """

    timeout: float
    can_wait: bool
    operation: Operation
    site_request: Any
    ending: BaseException | None

    @property
    def client(self) -> ClientView: ...

    @property
    def session(self) -> Session | None: ...

    request_id: jsonrpc.RequestId
    progress_token: jsonrpc.RequestId | None

    def ask(
        self, requests: list[InputRequest], timeout: float | None = None, withdrawal: Withdrawal | None = None
    ) -> list[jsonrpc.Response]:
        """The client's answers to ``requests``, in order.

        Args:
            requests: the questions.
            timeout: [seconds] (handshake) the longest wait for all the answers, at most
                :attr:`timeout`, which None means; a stateless round never waits and ignores it.
            withdrawal: (handshake) withdraws the requests, ending the wait, when withdrawn
                from another thread; a stateless round never waits and ignores it.

        Raises:
            zemcp.state.waitingcalls.CapacityError: (handshake) a pending cap is reached; nothing was sent.
            TimeoutError: (handshake) not every answer arrived within the elicitation timeout.
            zemcp.eras.modern.mrtr.InputRequired: (stateless) the round ends here to ask the client.
            zemcp.ElicitAborted: the request can no longer be answered.
        """

    def notify(self, message: dict[str, Any]) -> None:
        """Send a notification related to the request on its stream.

        Raises:
            zemcp.ElicitAborted: the request can no longer be answered.
        """

    def raise_if_aborted(self) -> None:
        """Raise the abort reason once the request can no longer be answered."""

    def on_abort(self, callback: Callable[[BaseException], object]) -> Callable[[], None]:
        """Run ``callback(reason)`` once when the request is aborted (at once if it was), on
        the aborting thread; returns the function that stops watching."""

    def end_stream(self) -> None:
        """End the client's connection to the request's stream now; the client reconnects
        with ``Last-Event-ID`` and the stream goes on there (handshake era over HTTP; nothing
        elsewhere)."""

    def show_status(self, message: str) -> None:
        """Show ``message`` (a progress message) as the request's status where it has one:
        a task's ``statusMessage``; nothing elsewhere."""

    def note_missing(self, required: dict[str, Any]) -> None:
        """Record that the handler needed ``required`` (a ``ClientCapabilities`` object) and
        the client had not declared it (a 2026-07-28 request that then fails answers -32021)."""
