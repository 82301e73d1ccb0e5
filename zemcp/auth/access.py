"""What one request's principal may see and use: :class:`Access`.

A registration's ``scopes=`` names the scopes its tool, prompt or resource needs (MCP
basic/authorization, scope challenges): lists leave out what the principal may not use, and
using it is refused with :class:`zemcp.auth.principal.InsufficientScope` (403 with the scopes
to step up to). A registration's ``permission=`` says which users may see and use it: what a
user may not use is left out of the lists and refused as an unknown name would be, so that
nothing tells a caller it exists. :mod:`zemcp.pipeline.authorization` gives each request its
:class:`Access`; the server's methods ask it (:meth:`Access.visible`, :meth:`Access.permits`,
:meth:`Access.check`) and know nothing of where the rules come from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.auth.principal import InsufficientScope

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal

log = logging.getLogger("zemcp.auth")

#: ``(kind, key)`` of a registration (``("tool", "deploy")``, ``("resource", "file:///{path}")``)
#: to the scopes it needs.
ScopeTable = Mapping[tuple[str, str], tuple[str, ...]]
#: ``permits(kind, key)``: whether a request may see and use a registration (:meth:`Access.permits`).
Permits = Callable[[str, str], bool]


class Access:
    """What a request's principal and user may see and use.

    Args:
        principal: whom the request acts for: who its token names, or the site user's
            principal (:func:`zemcp.auth.principal.site_principal`); None for no one.
        scopes: the registrations' needed scopes (the server's table, read at each check, so
            that later registrations count).
        user: whom ``permission=`` rules are asked about: the site's user, else the principal.
        permissions: the registrations' ``permission=`` rules, ``(kind, key) -> rule(user)``
            (the server's table).
        scoped: the principal's scopes are checked (it came from a token); False for a site
            user's principal, which holds no token, or without authorization.
    """

    __slots__ = ("_permissions", "_scoped_principal", "_scopes", "principal", "user")

    def __init__(
        self,
        principal: Principal | None,
        scopes: ScopeTable,
        user: Any = None,
        permissions: Mapping[tuple[str, str], Callable[[Any], bool]] | None = None,
        scoped: bool = True,
    ):
        self.principal = principal
        self._scoped_principal = principal if scoped else None
        self._scopes = scopes
        self.user = user
        self._permissions = permissions or {}

    @property
    def filters(self) -> bool:
        """True when some item may be hidden from a list (a principal and a registration with
        scopes, or a registration with a permission)."""
        return (self._scoped_principal is not None and bool(self._scopes)) or bool(self._permissions)

    def visible(self, kind: str, key: str) -> bool:
        """True when the principal and user may use ``kind`` ``key`` (``"tool"``,
        ``"prompt"``, ``"resource"``; a name, or a resource's URI or URI template): what a
        list shows."""
        return self.permits(kind, key) and self._scoped(kind, key)

    def permits(self, kind: str, key: str) -> bool:
        """True when the registration's ``permission=`` (if any) lets the user see and use it.

        A rule that raises counts as a refusal (logged): a broken rule must not open a tool.
        """
        rule = self._permissions.get((kind, key))
        if rule is None:
            return True
        try:
            return bool(rule(self.user))
        except Exception:
            log.exception("the permission rule of %s %s failed; it is refused", kind, logsafe.clip(key))
            return False

    def check(self, kind: str, key: str, what: str) -> None:
        """Refuse the use of ``kind`` ``key`` the principal's scopes do not allow (a use the
        user is not permitted is refused before, as an unknown name: :meth:`permits`).

        Args:
            what: the operation, for the refusal (``"tools/call 'deploy'"``).
        Raises:
            InsufficientScope: its registration needs scopes the token does not grant.
        """
        if not self._scoped(kind, key):
            raise InsufficientScope(list(self._scopes[(kind, key)]), what)

    def _scoped(self, kind: str, key: str) -> bool:
        principal = self._scoped_principal
        return principal is None or not principal.missing(self._scopes.get((kind, key), ()))


#: The access of a request without authorization or permissions: everything visible and usable.
OPEN = Access(None, {})
