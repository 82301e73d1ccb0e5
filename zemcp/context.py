"""The context a handler gets to talk to the client during its request.

A handler declares a parameter named ``ctx`` (or annotated :class:`Context`) to receive it.
Everything the server may send to the client while a request runs goes through here, on the
request's own reply sink (MCP basic/transports: messages related to a request ride that
request's response stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zemcp import elicitation

if TYPE_CHECKING:
    from zemcp.correlation import CorrelationTable
    from zemcp.session import Call, Session


class Context:
    """What a handler gets to talk to the client during its call.

    Attributes:
        session: the caller's session (``session.client_info``, ``protocol_version`` ...).
        request_id: the JSON-RPC id of the tools/call.
    """

    def __init__(self, call: "Call", table: "CorrelationTable", elicitation_timeout: float):
        self._call = call
        self._table = table
        self._timeout = elicitation_timeout
        self.session: "Session" = call.session
        self.request_id = call.request_id

    def client_supports_elicit(self) -> bool:
        """True when the client declared the elicitation capability; check before eliciting."""
        return self.session.client_supports_elicit()

    def elicit(self, message: str, requested_schema: dict) -> dict:
        """Ask the user for information and wait for the answer (MCP client/elicitation).

        Ask before doing side effects: the wait can end in decline, cancel, timeout or the
        client going away, and the handler should then leave nothing half done.

        Args:
            message: the question shown to the user.
            requested_schema: a flat ``{"type": "object", "properties": {...}}`` schema of
                string, number, integer and boolean fields.
        Returns:
            the accepted content, validated against ``requested_schema``.
        Raises:
            zemcp.ElicitError: a subclass names the outcome (declined, cancelled, malformed,
                unsupported, too many pending, schema invalid, timeout, request cancelled,
                session ended, client disconnected).
        """
        return elicitation.elicit(self._call, self._table, self._timeout, message, requested_schema)
