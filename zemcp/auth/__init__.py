"""Authorization: zemcp as an OAuth 2.1 resource server (MCP basic/authorization).

Every request to the endpoint carries ``Authorization: Bearer <access token>``; a token
verifier turns the token into a principal or refuses it, and :class:`Authorization` serves
the Protected Resource Metadata (RFC 9728), answers 401/403 with ``WWW-Authenticate``
challenges and checks scopes. The package's modules, lowest first:

- :mod:`zemcp.auth.principal`: :class:`Principal` (who a request acts for, and how granted
  scopes cover needed ones), the verifier errors :class:`InvalidToken` and
  :class:`VerifierUnavailable`, and the refusals :class:`InsufficientScope` and
  :class:`Challenge`;
- :mod:`zemcp.auth.jwks`: the JWKS signing keys a :class:`JwtVerifier` checks tokens with,
  fetched so that no token of a known key waits for a fetch;
- :mod:`zemcp.auth.verifiers`: the ``TokenVerifier`` protocol and the two verifiers that
  come with zemcp, :class:`JwtVerifier` (PyJWT, JWKS) and :class:`IntrospectionVerifier`
  (RFC 7662);
- :mod:`zemcp.auth.authorization`: :class:`Authorization`, the resource-server side for one
  endpoint.

This package re-exports the public names; zemcp's own modules import them from the module
that defines them. The verifiers' names load :mod:`zemcp.auth.verifiers` (and with it PyJWT
and cryptography) on first use, so that a server without authorization never imports them.
"""

from typing import TYPE_CHECKING, Any

from zemcp.auth.authorization import Authorization
from zemcp.auth.principal import Challenge, InsufficientScope, InvalidToken, Principal, VerifierUnavailable

if TYPE_CHECKING:
    from zemcp.auth.verifiers import IntrospectionVerifier, JwtVerifier, TokenVerifier

#: The names of :mod:`zemcp.auth.verifiers` this package offers, loaded on first use.
_VERIFIER_NAMES = frozenset({"IntrospectionVerifier", "JwtVerifier", "TokenVerifier"})

__all__ = [
    "Principal",
    "InvalidToken",
    "VerifierUnavailable",
    "InsufficientScope",
    "Challenge",
    "TokenVerifier",
    "JwtVerifier",
    "IntrospectionVerifier",
    "Authorization",
]


def __getattr__(name: str) -> Any:
    """The verifiers' names (PEP 562): imported from :mod:`zemcp.auth.verifiers` when first asked for."""
    if name in _VERIFIER_NAMES:
        from zemcp.auth import verifiers

        value = getattr(verifiers, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zemcp.auth' has no attribute {name!r}")
