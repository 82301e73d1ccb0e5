"""The resource-server side of MCP authorization (MCP basic/authorization): :class:`Authorization`.

Every request to the endpoint carries ``Authorization: Bearer <access token>``; the
endpoint's :class:`~zemcp.auth.verifiers.TokenVerifier` turns the token into a
:class:`~zemcp.auth.principal.Principal` or refuses it, and :class:`Authorization` answers
what the spec asks of a protected resource:

- the Protected Resource Metadata document (RFC 9728) at
  ``/.well-known/oauth-protected-resource<path of the resource>``, naming the authorization
  server(s) and the scopes;
- 401 with ``WWW-Authenticate: Bearer resource_metadata="…", scope="…"`` for a request
  without a usable token (RFC 6750 section 3, RFC 9728 section 5.1), with
  ``error="invalid_token"`` when a token was sent and refused;
- 403 with ``error="insufficient_scope"`` and every scope the operation needs at once
  (2025-11-25 step-up, SEP-835; 2026-07-28 SEP-2350).

``offline_access`` is never challenged nor listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from zemcp.auth.principal import Challenge, InsufficientScope, InvalidToken, Principal

if TYPE_CHECKING:
    from zemcp.auth.verifiers import TokenVerifier
    from zemcp.config import Settings

METADATA_PREFIX = "/.well-known/oauth-protected-resource"
#: A refresh grant, not a permission of the resource: never challenged or listed (2026-07-28).
OFFLINE_ACCESS = "offline_access"


class Authorization:
    """The resource-server side of MCP authorization for one endpoint.

    Args:
        verifier: turns tokens into principals (:class:`JwtVerifier`, :class:`IntrospectionVerifier`
            or your own :class:`TokenVerifier`).
        resource: this server's canonical URL (``https://mcp.example.com/mcp``): the
            ``resource`` of the metadata and the audience tokens must carry.
        authorization_servers: issuer URLs of the authorization servers, spelled exactly as
            their metadata's ``issuer``.
        scopes: scopes every request needs.
        resource_name: optional human-readable name for the metadata.
    Raises:
        ValueError: ``resource`` is not an absolute http(s) URL without a fragment, or no
            authorization server is given.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str,
        authorization_servers: Iterable[str],
        scopes: Iterable[str] = (),
        resource_name: str | None = None,
    ):
        parts = urlsplit(resource)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment or parts.query:
            raise ValueError(
                f"the resource must be an absolute http(s) URL without query or fragment, got {resource!r}"
            )
        self.resource = resource.rstrip("/") if parts.path not in ("", "/") else resource
        self.authorization_servers = list(authorization_servers)
        if not self.authorization_servers:
            raise ValueError("authorization needs at least one authorization server (issuer URL)")
        self.verifier = verifier
        self.scopes = tuple(s for s in scopes if s != OFFLINE_ACCESS)
        self.resource_name = resource_name
        path = urlsplit(self.resource).path.rstrip("/")
        #: Where the metadata is served (a path at the host's root).
        self.metadata_path = METADATA_PREFIX + path
        #: The metadata document's absolute URL, named in every challenge.
        self.metadata_url = f"{parts.scheme}://{parts.netloc}{self.metadata_path}"

    @classmethod
    def from_settings(cls, settings: Settings, resource_name: str | None = None) -> Authorization | None:
        """The authorization ``settings.auth`` asks for, or None when it is ``off``."""
        if settings.auth == "off":
            return None
        # Imported here: PyJWT and cryptography load only where authorization is on.
        from zemcp.auth.verifiers import IntrospectionVerifier, JwtVerifier

        resource = settings.auth_resource_url
        if settings.auth == "jwt":
            verifier: TokenVerifier = JwtVerifier(
                jwks_url=settings.auth_jwks_url,
                issuer=settings.auth_issuer,
                audience=resource,
                algorithms=settings.auth_algorithms,
                leeway=settings.auth_leeway,
                jwks_lifespan=settings.auth_jwks_lifespan,
                jwks_cooldown=settings.auth_jwks_cooldown,
                timeout=settings.auth_timeout,
            )
        else:
            verifier = IntrospectionVerifier(
                url=settings.auth_introspection_url,
                client_id=settings.auth_client_id,
                client_secret=settings.auth_client_secret,
                audience=resource,
                issuer=settings.auth_issuer,
                leeway=settings.auth_leeway,
                timeout=settings.auth_timeout,
                cache_seconds=settings.auth_introspection_cache,
            )
        return cls(
            verifier,
            resource=resource,
            authorization_servers=[settings.auth_issuer],
            scopes=settings.auth_scopes,
            resource_name=resource_name,
        )

    def metadata(self, scopes_supported: Iterable[str] = ()) -> dict[str, Any]:
        """The Protected Resource Metadata document (RFC 9728 section 2)."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        }
        scopes = [s for s in dict.fromkeys([*self.scopes, *scopes_supported]) if s != OFFLINE_ACCESS]
        if scopes:
            document["scopes_supported"] = scopes
        if self.resource_name:
            document["resource_name"] = self.resource_name
        return document

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of a request's ``Authorization`` header value.

        Raises:
            Challenge: 401 without a bearer token or with a refused one; 400 for a malformed
                header; 403 when the token lacks a scope every request needs.
            VerifierUnavailable: the token could not be checked now.
        """
        if authorization is None or not authorization.strip():
            raise self._challenge(
                401,
                None,
                "Unauthorized: this server needs an OAuth access token "
                "(Authorization: Bearer <token>); its metadata names the "
                f"authorization server: {self.metadata_url}",
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            # Never echo what was sent: a token without its scheme would come back in the body.
            raise self._challenge(
                401, None, "Unauthorized: only the Bearer scheme is accepted; send Authorization: Bearer <access token>"
            )
        token = token.strip()
        if not token or " " in token or "," in token:
            raise self._challenge(
                400,
                "invalid_request",
                "Bad Request: the Authorization header must be 'Bearer <token>' with one token, sent once",
            )
        try:
            principal = self.verifier.verify(token)
        except InvalidToken as exc:
            raise self._challenge(
                401,
                "invalid_token",
                f"Unauthorized: {exc.description}; get a new access token",
                description=exc.description,
            ) from None
        missing = principal.missing(self.scopes)
        if missing:
            raise self.challenge_for(InsufficientScope([], "this server"), missing)
        return principal

    def challenge_for(self, exc: InsufficientScope, missing: Iterable[str] = ()) -> Challenge:
        """The 403 ``insufficient_scope`` challenge of an operation that needs more scope: it
        lists every scope the operation needs (the server-wide ones and ``exc.needed``), and the
        message names the ``missing`` ones when they are known."""
        scopes = [s for s in dict.fromkeys([*self.scopes, *exc.needed]) if s != OFFLINE_ACCESS]
        lacks = f"; the access token lacks {' '.join(missing)}" if missing else ""
        return self._challenge(
            403,
            "insufficient_scope",
            f"Forbidden: {exc.what} needs the scope(s) {' '.join(scopes)}{lacks}; ask the "
            "authorization server for a token with them",
            description=f"{exc.what} needs the scope(s) {' '.join(scopes)}",
            scopes=scopes,
        )

    def _challenge(
        self,
        status: int,
        error: str | None,
        message: str,
        *,
        description: str | None = None,
        scopes: Iterable[str] | None = None,
    ) -> Challenge:
        params = []
        if error is not None:
            params.append(("error", error))
        if description is not None:
            params.append(("error_description", description))
        params.append(("resource_metadata", self.metadata_url))
        scope = " ".join(self.scopes if scopes is None else scopes)
        if scope:
            params.append(("scope", scope))
        header = "Bearer " + ", ".join(f'{name}="{_quoted(value)}"' for name, value in params)
        return Challenge(status, header, message)


def _quoted(value: str) -> str:
    # RFC 6750 forbids '"' and '\' in these values; client-chosen text never gets here, but keep it a token.
    return "".join(c for c in value if c not in '"\\' and 0x20 <= ord(c) < 0x7F)
