"""Input requests: what a handler asks of the client (elicitation, sampling, roots), in either era.

A handler asks through its :class:`zemcp.Context`; the context turns each question into an
:class:`InputRequest` and hands a batch to the request's :class:`Exchange`, which is the
only era-specific piece:

- handshake era (:class:`zemcp.state.sessions.Call`): each input request is sent as a JSON-RPC
  request on the call's SSE stream, and the handler's thread waits in the correlation table
  until the client POSTs the answers (MCP 2025-11-25 basic/transports);
- stateless 2026-07-28 era (:class:`zemcp.eras.modern.mrtr.Round`): an answer recorded in an earlier
  round is returned at once; the first question without one ends the round with an
  ``InputRequiredResult`` (MCP 2026-07-28 basic/patterns/mrtr, SEP-2322).

Either way the handler gets the client's result dict, or an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from zemcp.protocol import jsonrpc
    from zemcp.protocol.capabilities import ClientView
    from zemcp.state.sessions import Session

#: The server-to-client methods an input request may carry.
METHODS = ("elicitation/create", "sampling/createMessage", "roots/list")


@dataclass(frozen=True)
class InputRequest:
    """One question for the client.

    Attributes:
        method: one of :data:`METHODS`.
        params: the request's params (JSON-encodable).
        key: the ``inputRequests`` key in the stateless era; None lets the round name it
            by position (``elicitation-1``, ``sampling-2`` ...). Ignored in the handshake era.
    """

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


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
    """

    timeout: float
    can_wait: bool

    @property
    def client(self) -> ClientView: ...

    @property
    def session(self) -> Session | None: ...

    request_id: jsonrpc.RequestId
    progress_token: jsonrpc.RequestId | None

    def ask(self, requests: list[InputRequest], timeout: float | None = None) -> list[jsonrpc.Response]:
        """The client's answers to ``requests``, in order.

        Args:
            requests: the questions.
            timeout: [seconds] (handshake) the longest wait for all the answers, at most
                :attr:`timeout`, which None means; a stateless round never waits and ignores it.

        Raises:
            zemcp.state.correlation.CapacityError: (handshake) a pending cap is reached; nothing was sent.
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

    def end_stream(self) -> None:
        """End the client's connection to the request's stream now; the client reconnects
        with ``Last-Event-ID`` and the stream goes on there (handshake era over HTTP; nothing
        elsewhere)."""

    def note_missing(self, required: dict[str, Any]) -> None:
        """Record that the handler needed ``required`` (a ``ClientCapabilities`` object) and
        the client had not declared it (a 2026-07-28 request that then fails answers -32021)."""
