"""Input requests: what a handler asks of the client (elicitation, sampling, roots), in either era.

A handler asks through its :class:`zemcp.Context`; the context turns each question into an
:class:`InputRequest` and hands a batch to the request's exchange
(:class:`zemcp.core.exchange.Exchange`), which is the only era-specific piece:

- handshake era (:class:`zemcp.eras.handshake.call.Call`): each input request is sent as a JSON-RPC
  request on the call's SSE stream, and the handler's thread waits in the correlation table
  until the client POSTs the answers (MCP 2025-11-25 basic/transports);
- stateless 2026-07-28 era (:class:`zemcp.eras.modern.mrtr.Round`): an answer recorded in an earlier
  round is returned at once; the first question without one ends the round with an
  ``InputRequiredResult`` (MCP 2026-07-28 basic/patterns/mrtr, SEP-2322).

Either way the handler gets the client's result dict, or an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The server-to-client methods an input request may carry.
METHODS = ("elicitation/create", "sampling/createMessage", "roots/list")
_SHORT = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def fallback_key(method: str, number: int) -> str:
    """The ``inputRequests`` key of a question asked without one: ``elicitation-<number>``,
    ``sampling-<number>``, ``roots-<number>`` (2026-07-28 rounds and tasks)."""
    return f"{_SHORT.get(method, 'input')}-{number}"


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
