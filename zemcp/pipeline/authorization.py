"""The authorization layer: what the principal and the user of each message may see and use.

Every message with a principal, or of a server with a ``permission=`` registration, gets its
:class:`zemcp.auth.access.Access`: under the registrations' ``scopes=`` (with authorization
on), lists leave out what the principal may not use, and a ``tools/call``, ``prompts/get``,
``resources/read``, ``resources/subscribe`` or ``completion/complete`` of such a thing is
refused with 403 ``insufficient_scope`` (MCP basic/authorization); under their
``permission=``, what the user may not use is left out and refused as an unknown name. The
user is the one the transport's site established (``context.user``), else the principal. The
token itself was verified by the transport, and the scopes every request needs with it.
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
        # The server's own tables: registrations made later count too.
        self._scopes = server.scope_table
        self._permissions = server.permission_table
        self._tokens = server.auth is not None
        self._next = next

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message`` with the access of its principal and user (everything, for a
        request without a token to a server without permissions)."""
        principal, user = context.principal, context.user
        if principal is not None or user is not None or self._permissions:
            user = user if user is not None else principal
            # Without zemcp's authorization the principal is a site user's, with no token, so
            # no scope is asked of it.
            context.access = Access(principal, self._scopes, user, self._permissions, scoped=self._tokens)
        return self._next(message, context)
