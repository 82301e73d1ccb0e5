"""The authorization layer: what the principal of each message may see and use.

With authorization on, every message gets the :class:`zemcp.auth.access.Access` of its
principal under the registrations' ``scopes=``: lists leave out what it may not use, and a
``tools/call``, ``prompts/get``, ``resources/read``, ``resources/subscribe`` or
``completion/complete`` of such a thing is refused with 403 ``insufficient_scope`` (MCP
basic/authorization). The token itself was verified by the transport, and the scopes every
request needs with it. A rule of another kind (the permissions of a site's user) joins
here, in the :class:`Access` this layer gives the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zemcp.auth.access import Access

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve
    from zemcp.protocol import jsonrpc


class Authorization:
    """Gives each message of one server the access of its principal.

    Args:
        server: the :class:`zemcp.core.server.Server` (its registrations' scopes).
        next: serves the message.
    """

    def __init__(self, server: Server, next: Serve):
        self._scopes = server.scope_table
        self._next = next

    @staticmethod
    def applies(server: Server) -> bool:
        """Whether the server's authorization is on (without it no message has a principal)."""
        return server.auth is not None

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message`` with the access of its principal (everything, for a request without a token)."""
        if context.principal is not None:
            context.access = Access(context.principal, self._scopes)
        return self._next(message, context)
