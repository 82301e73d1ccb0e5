"""Authorization: zemcp as an OAuth 2.1 resource server (MCP basic/authorization).

Every request to the endpoint carries ``Authorization: Bearer <access token>``; a
:class:`TokenVerifier` turns the token into a :class:`Principal` or refuses it, and
:class:`Authorization` answers what the spec asks of a protected resource:

- the Protected Resource Metadata document (RFC 9728) at
  ``/.well-known/oauth-protected-resource<path of the resource>``, naming the authorization
  server(s) and the scopes;
- 401 with ``WWW-Authenticate: Bearer resource_metadata="…", scope="…"`` for a request
  without a usable token (RFC 6750 section 3, RFC 9728 section 5.1), with
  ``error="invalid_token"`` when a token was sent and refused;
- 403 with ``error="insufficient_scope"`` and every scope the operation needs at once
  (2025-11-25 step-up, SEP-835; 2026-07-28 SEP-2350).

Two verifiers come with zemcp, both on well-kept libraries: :class:`JwtVerifier` (PyJWT,
signature against the authorization server's JWKS, which it fetches, caches and refetches
for an unknown key id) and :class:`IntrospectionVerifier` (RFC 7662 over the standard library's urllib). Both
check the audience (RFC 8707: the token must be issued for this resource), the issuer and
the expiry. The client's token is never forwarded anywhere: the verifiers send it only to
the authorization server that issued it, to check it.

Scopes nest: a granted ``files`` covers a needed ``files:read`` (2026-07-28: servers
account for scope hierarchies). ``offline_access`` is never challenged nor listed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

import jwt

if TYPE_CHECKING:
    from zemcp.config import Settings

log = logging.getLogger("zemcp.auth")

METADATA_PREFIX = "/.well-known/oauth-protected-resource"
#: Asymmetric JWS algorithms a :class:`JwtVerifier` may accept; ``none`` and the HMAC
#: family (a secret shared with the resource server) never are.
JWT_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
#: [bytes] the largest introspection answer read.
MAX_INTROSPECTION_BYTES = 64 * 1024
#: Introspection results kept at most (each for ``cache_seconds`` or until the token expires).
INTROSPECTION_CACHE_SIZE = 1024
#: A refresh grant, not a permission of the resource: never challenged or listed (2026-07-28).
OFFLINE_ACCESS = "offline_access"


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

    def missing(self, needed: Iterable[str]) -> list[str]:
        """The scopes of ``needed`` that the granted scopes do not cover (a granted ``a``
        covers ``a`` and ``a:anything``), in the order given."""
        return [scope for scope in needed if not _covered(scope, self.scopes)]


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
    answered 503, since another token would not help."""


class TokenVerifier(Protocol):
    """Turns a bearer token into a :class:`Principal`.

    ``verify`` must check that the token is genuine, unexpired and issued for this resource
    (its audience), and raise :class:`InvalidToken` otherwise, or
    :class:`VerifierUnavailable` when it cannot tell. It is called on a request thread and may
    block (bounded by its own timeouts).
    """

    def verify(self, token: str) -> Principal: ...


class JwtVerifier:
    """Verifies JWT access tokens (RFC 9068 style) against the authorization server's JWKS.

    Args:
        jwks_url: the authorization server's ``jwks_uri``.
        issuer: the exact ``iss`` tokens must carry.
        audience: this resource's identifier; the token's ``aud`` must be or contain it.
        algorithms: accepted ``alg`` values, a subset of :data:`JWT_ALGORITHMS`.
        leeway: [seconds] clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        jwks_lifespan: [seconds] how long a fetched JWKS is used before it is fetched again.
        jwks_cooldown: [seconds] a token with an unknown ``kid`` makes the JWKS be fetched
            again (keys rotate) only when the last fetch, the first included, is older than
            this, so random key ids cannot flood the authorization server.
        timeout: [seconds] bound on one JWKS fetch.
    Raises:
        ValueError: an algorithm outside :data:`JWT_ALGORITHMS`.
    """

    def __init__(
        self,
        *,
        jwks_url: str,
        issuer: str,
        audience: str,
        algorithms: Iterable[str] = ("RS256", "ES256"),
        leeway: float = 10.0,
        jwks_lifespan: float = 300.0,
        jwks_cooldown: float = 30.0,
        timeout: float = 5.0,
    ):
        self.algorithms = tuple(algorithms)
        refused = [a for a in self.algorithms if a not in JWT_ALGORITHMS]
        if refused or not self.algorithms:
            raise ValueError(
                f"JWT algorithms must be among {', '.join(sorted(JWT_ALGORITHMS))}; got {', '.join(refused) or 'none'}"
            )
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self._jwks = jwt.PyJWKClient(jwks_url, lifespan=jwks_lifespan, timeout=timeout, cooldown_duration=jwks_cooldown)

    def verify(self, token: str) -> Principal:
        """The principal of a valid token.

        Raises:
            InvalidToken: not a JWT, an algorithm not accepted, an unknown key, a bad
                signature, expired, or another issuer or audience.
            VerifierUnavailable: the JWKS could not be fetched.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise InvalidToken("the access token is not a JWT") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise InvalidToken(
                f"the access token's algorithm {alg!r} is not accepted (accepted: {', '.join(self.algorithms)})"
            )
        try:
            key = self._jwks.get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError as exc:
            log.warning("cannot fetch the JWKS to check an access token: %s", exc)
            raise VerifierUnavailable("the authorization server's keys (JWKS) cannot be fetched") from None
        except jwt.PyJWKSetError as exc:
            log.warning("the JWKS of the authorization server is unusable: %s", exc)
            raise VerifierUnavailable("the authorization server's keys (JWKS) are unusable") from None
        except jwt.PyJWKClientError:
            raise InvalidToken(
                "the access token is signed with a key the authorization server does not publish"
            ) from None
        except jwt.InvalidTokenError:
            raise InvalidToken("the access token is malformed") from None
        except ValueError as exc:  # the JWKS URL answered something that is not JSON
            log.warning("the JWKS of the authorization server is not JSON: %s", exc)
            raise VerifierUnavailable("the authorization server's keys (JWKS) are unusable") from None
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the access token has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(f"the access token was not issued for this resource ({self.audience})") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(f"the access token was not issued by {self.issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the access token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the access token's signature does not verify") from None
        except (jwt.InvalidKeyError, TypeError, ValueError):
            # An alg that does not fit the key its kid names (RS256 with an EC or oct key).
            raise InvalidToken(f"the access token's algorithm {alg} does not fit the key it names") from None
        except jwt.InvalidTokenError as exc:
            raise InvalidToken(f"the access token is invalid: {exc}") from None
        return _principal(claims)


class IntrospectionVerifier:
    """Verifies opaque (or any) access tokens by asking the authorization server (RFC 7662).

    Args:
        url: the introspection endpoint.
        client_id, client_secret: this resource server's own credentials at the
            authorization server (HTTP Basic), not the client's token.
        audience: this resource's identifier; the answer's ``aud`` must be or contain it.
        issuer: when given, the answer's ``iss``, if present, must equal it.
        leeway: [seconds] clock skew allowed on ``exp``.
        timeout: [seconds] bound on one introspection request.
        cache_seconds: [seconds] how long an active answer is reused (never past the
            token's ``exp``); 0 asks on every request. Inactive answers are not kept.
    """

    def __init__(
        self,
        *,
        url: str,
        client_id: str,
        client_secret: str,
        audience: str,
        issuer: str | None = None,
        leeway: float = 10.0,
        timeout: float = 5.0,
        cache_seconds: float = 30.0,
    ):
        self.url = url
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self._credentials = (client_id, client_secret)
        self._lock = threading.Lock()
        # sha256 of the token -> (principal, reuse until [monotonic seconds]): no raw tokens kept.
        self._cache: dict[bytes, tuple[Principal, float]] = {}

    def verify(self, token: str) -> Principal:
        """The principal of an active token issued for this resource.

        Raises:
            InvalidToken: inactive, expired, or for another audience or issuer.
            VerifierUnavailable: the endpoint could not be reached or answered no JSON object.
        """
        digest = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if (
            cached is not None
            and cached[1] > now
            and (cached[0].expires_at is None or cached[0].expires_at > time.time())
        ):
            return cached[0]
        answer = self._introspect(token)
        if answer.get("active") is not True:
            raise InvalidToken(
                "the access token is not active (revoked, expired or unknown to the authorization server)"
            )
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp + self.leeway < time.time():
            raise InvalidToken("the access token has expired")
        audiences = answer.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences if isinstance(audiences, list) else []
        if self.audience not in audiences:
            raise InvalidToken(f"the access token was not issued for this resource ({self.audience})")
        if self.issuer is not None and answer.get("iss") not in (None, self.issuer):
            raise InvalidToken(f"the access token was not issued by {self.issuer}")
        if not isinstance(answer.get("sub"), str) and not isinstance(answer.get("client_id"), str):
            raise InvalidToken("the introspection answer names no subject or client")
        # Client-credentials tokens may name only the client: it is then the subject.
        principal = _principal({**answer, "sub": answer.get("sub") or answer.get("client_id")})
        if self.cache_seconds > 0:
            with self._lock:
                if len(self._cache) >= INTROSPECTION_CACHE_SIZE:
                    self._cache = {k: v for k, v in self._cache.items() if v[1] > now}
                if len(self._cache) < INTROSPECTION_CACHE_SIZE:
                    self._cache[digest] = (principal, now + self.cache_seconds)
        return principal

    def _introspect(self, token: str) -> dict[str, Any]:
        client_id, client_secret = self._credentials
        # RFC 6749 2.3.1: the client credentials are form-encoded before the Basic encoding.
        basic = base64.b64encode(f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()).decode()
        request = urllib.request.Request(
            self.url,
            method="POST",
            data=urlencode({"token": token, "token_type_hint": "access_token"}).encode(),
            headers={
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": f"Basic {basic}",
            },
        )
        try:
            with _NO_REDIRECTS.open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read(MAX_INTROSPECTION_BYTES)
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, b""
        except (urllib.error.URLError, OSError) as exc:
            log.warning("cannot reach the introspection endpoint: %s", exc)
            raise VerifierUnavailable("the authorization server's introspection endpoint cannot be reached") from None
        try:
            answer = json.loads(raw) if status == 200 else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            log.warning("the introspection endpoint answered %s without a JSON object", status)
            raise VerifierUnavailable(f"the introspection endpoint answered {status}")
        return answer


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would resend the token elsewhere: it is an error answer instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)


def _principal(claims: Mapping[str, Any]) -> Principal:
    scope = claims.get("scope")
    if isinstance(scope, str):
        scopes = frozenset(scope.split())
    else:
        listed = claims.get("scp")
        scopes = frozenset(s for s in listed if isinstance(s, str)) if isinstance(listed, list) else frozenset()
    client = claims.get("client_id", claims.get("azp"))
    exp = claims.get("exp")
    return Principal(
        subject=str(claims["sub"]),
        client_id=client if isinstance(client, str) else None,
        issuer=claims.get("iss") if isinstance(claims.get("iss"), str) else None,
        scopes=scopes,
        expires_at=float(exp) if isinstance(exp, (int, float)) else None,
        claims=dict(claims),
    )


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
