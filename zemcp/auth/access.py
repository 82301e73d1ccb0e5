"""What one request's principal may see and use: :class:`Access`.

A registration's ``scopes=`` names the scopes its tool, prompt or resource needs (MCP
basic/authorization, scope challenges): lists leave out what the principal may not use, and
using it is refused with :class:`zemcp.auth.principal.InsufficientScope` (403 with the scopes
to step up to). :mod:`zemcp.pipeline.authorization` gives each request its :class:`Access`;
the server's methods ask it (:meth:`Access.visible`, :meth:`Access.check`) and know nothing of
where the rules come from, so that a rule of another kind (the permissions of a site's user)
joins there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from zemcp.auth.principal import InsufficientScope

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal

#: ``(kind, key)`` of a registration (``("tool", "deploy")``, ``("resource", "file:///{path}")``)
#: to the scopes it needs.
ScopeTable = Mapping[tuple[str, str], tuple[str, ...]]


class Access:
    """What ``principal`` may see and use under the registrations' scopes.

    Args:
        principal: who the request's token names; None when authorization is off (then
            everything is visible and usable).
        scopes: the registrations' needed scopes (the server's table, read at each check, so
            that later registrations count).
    """

    __slots__ = ("principal", "_scopes")

    def __init__(self, principal: Principal | None, scopes: ScopeTable):
        self.principal = principal
        self._scopes = scopes

    @property
    def filters(self) -> bool:
        """True when some item may be hidden from a list (a principal, and a registration with scopes)."""
        return self.principal is not None and bool(self._scopes)

    def visible(self, kind: str, key: str) -> bool:
        """True when the principal may use ``kind`` ``key`` (``"tool"``, ``"prompt"``,
        ``"resource"``; a name, or a resource's URI or URI template)."""
        principal = self.principal
        return principal is None or not principal.missing(self._scopes.get((kind, key), ()))

    def check(self, kind: str, key: str, what: str) -> None:
        """Refuse the use of ``kind`` ``key`` the principal may not make.

        Args:
            what: the operation, for the refusal (``"tools/call 'deploy'"``).
        Raises:
            InsufficientScope: its registration needs scopes the token does not grant.
        """
        if not self.visible(kind, key):
            raise InsufficientScope(list(self._scopes[(kind, key)]), what)


#: The access of a request without authorization: everything visible and usable.
OPEN = Access(None, {})
