"""Token verifiers: a bearer token in, a :class:`~zemcp.auth.principal.Principal` out, or a refusal.

:class:`TokenVerifier` is what :class:`~zemcp.auth.authorization.Authorization` asks of a
verifier. Two come with zemcp, both on well-kept libraries: :class:`JwtVerifier` (PyJWT,
signature against the authorization server's JWKS, which :class:`~zemcp.auth.jwks.JwksKeys`
fetches, keeps and refetches for an unknown key id, never holding a token whose key it
knows behind a fetch) and :class:`IntrospectionVerifier` (RFC 7662 over the standard library's urllib). Both
check the audience (RFC 8707: the token must be issued for this resource), the issuer and
the expiry. The client's token is never forwarded anywhere: the verifiers send it only to
the authorization server that issued it, to check it.
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
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import jwt

from zemcp.auth.jwks import JwksKeys, KeysUnavailable, UnknownKey
from zemcp.auth.principal import InvalidToken, Principal, VerifierUnavailable

log = logging.getLogger("zemcp.auth")

#: Asymmetric JWS algorithms a :class:`JwtVerifier` may accept; ``none`` and the HMAC
#: family (a secret shared with the resource server) never are.
JWT_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
#: [bytes] the largest introspection answer read.
MAX_INTROSPECTION_BYTES = 64 * 1024
#: Introspection results kept at most (each for ``cache_seconds`` or until the token expires).
INTROSPECTION_CACHE_SIZE = 1024


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
        jwks_lifespan: [seconds] how long a fetched JWKS is used before it is fetched again
            (in the background: tokens of known keys are served meanwhile).
        jwks_cooldown: [seconds] a token with an unknown ``kid`` makes the JWKS be fetched
            again (keys rotate) only when the last successful fetch, the first included, is
            older than this, so random key ids cannot flood the authorization server; also
            the longest pause after failed fetches (1 s, doubled at each failure in a row).
        timeout: [seconds] bound on one JWKS fetch, and on the wait of the request it is for.
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
        self._jwks = JwksKeys(jwks_url, lifespan=jwks_lifespan, cooldown=jwks_cooldown, timeout=timeout)

    def verify(self, token: str) -> Principal:
        """The principal of a valid token.

        Raises:
            InvalidToken: not a JWT, an algorithm not accepted, an unknown key, a bad
                signature, expired, or another issuer or audience.
            VerifierUnavailable: the token's key is not known and the JWKS cannot be fetched
                now (``retry_after`` says when to try again).
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
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise InvalidToken("the access token names no key (kid)")
        try:
            key = self._jwks.key(kid).key
        except KeysUnavailable as exc:
            raise VerifierUnavailable(str(exc), retry_after=exc.retry_after) from None
        except UnknownKey:
            raise InvalidToken(
                "the access token is signed with a key the authorization server does not publish"
            ) from None
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
