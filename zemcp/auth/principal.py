"""Who a request acts for and why it is refused: the :class:`Principal` a token names, the
errors a verifier raises (:class:`InvalidToken`, :class:`VerifierUnavailable`), and the
refusals of an operation (:class:`InsufficientScope`, and the :class:`Challenge` that carries
its ``WWW-Authenticate`` header).

Scopes nest: a granted ``files`` covers a needed ``files:read`` (2026-07-28: servers
account for scope hierarchies).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Principal:
    """Who a request acts for, as its access token says.

    Attributes:
        subject: the token's ``sub`` (the user, or the client for client credentials).
        client_id: the OAuth client the token was issued to (``client_id`` or ``azp``), or None.
        issuer: the authorization server that issued it (``iss``), or None.
        scopes: the granted scopes.
        expires_at: [seconds since the epoch] the token's ``exp``, or None.
        claims: every claim of the token (JWT) or of the introspection answer.
    """

    subject: str
    client_id: str | None = None
    issuer: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        """What a session and a ``requestState`` are bound to: issuer, subject and client.

        Not the token itself, which changes at every refresh.
        """
        return json.dumps([self.issuer, self.subject, self.client_id], separators=(",", ":"))

    @property
    def user(self) -> str:
        """Who the token speaks for, whichever client it was issued to: issuer and subject.

        The fair shares of the threads count under it, so that a user who registers many
        OAuth clients still holds one share.
        """
        return json.dumps([self.issuer, self.subject], separators=(",", ":"))

    def missing(self, needed: Iterable[str]) -> list[str]:
        """The scopes of ``needed`` that the granted scopes do not cover (a granted ``a``
        covers ``a`` and ``a:anything``), in the order given."""
        return [scope for scope in needed if not _covered(scope, self.scopes)]


#: The ``issuer`` of the principal of a site's user (:func:`site_principal`): never an OAuth issuer's URL.
SITE = "site"


def site_principal(user: Any) -> Principal:
    """The principal of a user a framework's authentication established (Django's or
    Flask-Login's user): sessions, tasks and ``requestState`` are bound to it, and the fair
    shares count under it, as for a token's principal. It carries no scopes: scopes are
    OAuth's, and a site without zemcp's authorization checks none.

    Args:
        user: the site's user: its ``get_username()`` (Django), else its ``username``, else
            ``get_id()`` (Flask-Login), else ``str(user)`` is the subject.
    Returns:
        ``Principal(subject, issuer="site")``.
    """
    for name in ("get_username", "username", "get_id"):
        value = getattr(user, name, None)
        value = value() if callable(value) else value
        if value is not None and value != "":
            return Principal(str(value), issuer=SITE)
    return Principal(str(user), issuer=SITE)


def _covered(scope: str, granted: frozenset[str]) -> bool:
    if scope in granted:
        return True
    parts = scope.split(":")
    return any(":".join(parts[:n]) in granted for n in range(1, len(parts)))


class InvalidToken(Exception):
    """The token cannot be used: answered 401 ``invalid_token`` with ``description``."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


class VerifierUnavailable(Exception):
    """The authorization server could not be asked (JWKS or introspection endpoint down):
    answered 503, since another token would not help.

    Args:
        message: what could not be done, for the JSON-RPC error.
        retry_after: [seconds] the 503's ``Retry-After``.
    """

    def __init__(self, message: str = "", retry_after: int = 5):
        super().__init__(message)
        self.retry_after = retry_after


class Challenge(Exception):
    """A refusal with its ``WWW-Authenticate`` challenge.

    Attributes:
        status: 401, 403 or 400.
        header: the ``WWW-Authenticate`` value.
        message: what a person reading the JSON-RPC error should do.
    """

    def __init__(self, status: int, header: str, message: str):
        super().__init__(message)
        self.status = status
        self.header = header
        self.message = message


class InsufficientScope(Exception):
    """An operation needs scopes the request's token does not grant (answered 403).

    Attributes:
        needed: every scope the operation needs (the challenge lists them all at once).
        what: the operation, e.g. ``"tools/call 'deploy'"``.
    """

    def __init__(self, needed: list[str], what: str):
        super().__init__(f"{what} needs the scope(s) {' '.join(needed)}")
        self.needed = needed
        self.what = what
