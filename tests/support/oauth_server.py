"""A real OAuth 2.1 authorization server for the tests, built on authlib's Flask integration.

:class:`OAuthServer` is an ``authlib.integrations.flask_oauth2.AuthorizationServer`` with the
grants, extensions and endpoints authlib ships, wired to in-memory stores, and served by
werkzeug in a background thread on ``127.0.0.1`` (a free port the OS picks):

==================================================  =============================================
``GET  /.well-known/oauth-authorization-server``     RFC 8414 metadata; ``issuer`` is
                                                     ``http://127.0.0.1:<port>`` (no trailing ``/``)
``POST /register``                                   RFC 7591 open dynamic client registration
                                                     (authlib ``ClientRegistrationEndpoint``)
``GET  /authorize``                                  authorization code grant (authlib
                                                     ``AuthorizationCodeGrant``), approved at once
                                                     for :attr:`OAuthServer.subject`; 302 to
                                                     ``redirect_uri?code=&state=&iss=`` (RFC 9207,
                                                     authlib ``IssuerParameter``)
``POST /token``                                      ``authorization_code`` with PKCE S256 required
                                                     (authlib ``CodeChallenge``), ``refresh_token``
                                                     with rotation (authlib ``RefreshTokenGrant``)
``GET  /jwks``                                       the public signing keys (RFC 7517)
``POST /introspect``                                 RFC 7662 (authlib ``IntrospectionEndpoint``),
                                                     for the pre-registered resource-server client
==================================================  =============================================

authlib has no RFC 8707 (resource indicators): the grants here record the ``resource``
parameters of the authorize request with the code, check the token request's against them,
and put the result into the access token's ``aud``. Access tokens are RFC 9068-style JWTs
(``typ: at+jwt``) signed RS256 with PyJWT by the current key, whose ``kid`` is in the header;
claims ``iss sub aud exp iat client_id scope jti``.

Test hooks: :meth:`OAuthServer.rotate_key` (a new key signs from now on, the old ones stay
in the JWKS), :meth:`OAuthServer.mint_token` (a token with chosen claims, ``kid``, ``alg`` or
key, without any grant), :attr:`OAuthServer.request_log` (every ``(method, path)`` served).

The ``oauth_server`` fixture starts one for a test and always stops it afterwards; import it
into the test module that uses it.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

import jwt
import pytest
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    ClientMixin,
    InvalidRequestError,
    OAuth2Error,
    TokenMixin,
    grants,
    list_to_scope,
    scope_to_list,
)
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata, get_well_known_url
from authlib.oauth2.rfc9207 import IssuerParameter
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, jsonify, request
from jwt.algorithms import RSAAlgorithm
from werkzeug.serving import make_server

HOST = "127.0.0.1"
#: Scopes the server offers unless told otherwise.
DEFAULT_SCOPES = ("mcp",)
#: [seconds] lifetime of issued access tokens.
ACCESS_TOKEN_LIFETIME = 600
#: [seconds] lifetime of issued refresh tokens.
REFRESH_TOKEN_LIFETIME = 3600
#: [seconds] lifetime of an authorization code (RFC 6749 §4.1.2 recommends at most 600).
CODE_LIFETIME = 60
#: [seconds] bound on waiting for the serving thread to end at stop.
STOP_TIMEOUT = 5.0
#: The pre-registered confidential client that may introspect (the resource server's own).
INTROSPECTION_CLIENT_ID = "resource-server"

_TOKEN_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
_MISSING = object()


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: a ``resource`` is not an absolute URI without fragment, or not granted."""

    error = "invalid_target"


# -- records ------------------------------------------------------------------------------


@dataclass
class Client(ClientMixin):
    """A registered client: its credentials and its RFC 7591 metadata."""

    client_id: str
    client_secret: str | None
    metadata: dict[str, Any]
    #: Whether it may call the introspection endpoint (only the resource server's client).
    may_introspect: bool = False

    @property
    def scope(self) -> str:
        """The scopes registered for this client (space separated)."""
        return self.metadata.get("scope", "")

    def get_client_id(self) -> str:
        """The client identifier."""
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        """The only redirect URI, when exactly one was registered (RFC 6749 §3.1.2.3)."""
        uris = self.metadata.get("redirect_uris", [])
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        """The requested scopes this client was registered for; all of those when none is asked."""
        allowed = scope_to_list(self.scope) or []
        if not scope:
            return list_to_scope(allowed)
        return list_to_scope([s for s in scope_to_list(scope) if s in allowed])

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """Exact match against the registered redirect URIs (OAuth 2.1 §2.3.1)."""
        return redirect_uri in self.metadata.get("redirect_uris", [])

    def check_client_secret(self, client_secret: str) -> bool:
        """Constant-time comparison with the issued secret; a public client has none."""
        return self.client_secret is not None and secrets.compare_digest(self.client_secret, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        """At the token endpoint only the registered method; elsewhere any secret-based one."""
        if endpoint == "token":
            return method == self.metadata.get("token_endpoint_auth_method", "client_secret_basic")
        return method != "none"

    def check_response_type(self, response_type: str) -> bool:
        """Whether ``response_type`` was registered."""
        return response_type in self.metadata.get("response_types", ["code"])

    def check_grant_type(self, grant_type: str) -> bool:
        """Whether ``grant_type`` was registered."""
        return grant_type in self.metadata.get("grant_types", ["authorization_code"])


@dataclass
class AuthorizationCode(AuthorizationCodeMixin):
    """An issued code, with what the token request must match (PKCE, redirect URI, resources)."""

    code: str
    client_id: str
    redirect_uri: str | None
    scope: str
    subject: str
    code_challenge: str
    code_challenge_method: str
    #: The RFC 8707 ``resource`` parameters of the authorize request.
    resources: tuple[str, ...]
    expires_at: float

    def get_redirect_uri(self) -> str | None:
        """The redirect URI the authorize request named (the token request must repeat it)."""
        return self.redirect_uri

    def get_scope(self) -> str:
        """The granted scope."""
        return self.scope


@dataclass
class IssuedToken(TokenMixin):
    """A refresh token held by the server, or an access token read back from its JWT."""

    token_type: str
    client_id: str
    subject: str
    scope: str
    issued_at: int
    expires_at: int
    #: The resources granted (a refresh token) or the audience (an access token).
    resources: tuple[str, ...]
    jti: str = ""
    revoked: bool = False

    def check_client(self, client: ClientMixin) -> bool:
        """Whether it was issued to ``client``."""
        return client.get_client_id() == self.client_id

    def get_scope(self) -> str:
        """The scope it carries."""
        return self.scope

    def is_expired(self) -> bool:
        """Whether its lifetime is over."""
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        """Whether it was replaced (refresh token rotation)."""
        return self.revoked


@dataclass(frozen=True)
class SigningKey:
    """An RSA key pair with its key id."""

    kid: str
    private_key: rsa.RSAPrivateKey = field(repr=False)

    @classmethod
    def generate(cls) -> SigningKey:
        """A new 2048-bit key with a random ``kid``."""
        return cls(uuid.uuid4().hex[:16], rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def public_jwk(self) -> dict[str, Any]:
        """The public half as a JWK, as the JWKS publishes it."""
        jwk = RSAAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True)
        jwk.update(kid=self.kid, use="sig", alg="RS256")
        return jwk


# -- RFC 8707 resource indicators and JWT access tokens for authlib's grants ----------------


def _resources(values: Iterable[str]) -> tuple[str, ...]:
    """The ``resource`` values, each checked to be an absolute URI without fragment."""
    resources = tuple(values)
    for resource in resources:
        parts = urlsplit(resource)
        if not parts.scheme or not parts.netloc or parts.fragment:
            raise InvalidTargetError(f"'resource' must be an absolute URI without fragment: {resource!r}")
    return resources


class _ResourceBoundTokens:
    """Mixin for authlib token grants: RFC 8707 audience and JWT access tokens.

    The grant's record (the code or the refresh token) holds the granted resources. A token
    request may narrow them with its own ``resource`` parameters, never widen them; what
    remains becomes the access token's ``aud``.
    """

    def generate_token(self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True):
        """Replaces authlib's bearer generator: the access token is a signed JWT for the audience."""
        granted = (self.request.authorization_code or self.request.refresh_token).resources
        requested = _resources(self.request.payload.datalist.get("resource", []))
        if granted and not set(requested) <= set(granted):
            raise InvalidTargetError("a requested 'resource' was not part of the grant")
        audience = requested or granted
        token = {
            "token_type": "Bearer",
            "access_token": self.server.sign_access_token(
                client_id=self.request.client.get_client_id(),
                subject=user,
                scope=scope,
                audience=audience,
            ),
            "expires_in": ACCESS_TOKEN_LIFETIME,
            "scope": scope,
        }
        if include_refresh_token:
            token["refresh_token"] = secrets.token_urlsafe(32)
        return token


class AuthorizationCodeGrant(_ResourceBoundTokens, grants.AuthorizationCodeGrant):
    """Authorization code grant for public (``none``) and confidential clients."""

    TOKEN_ENDPOINT_AUTH_METHODS = _TOKEN_AUTH_METHODS

    def validate_authorization_request(self) -> str:
        """authlib's checks, then the ``resource`` parameters (an error goes to the redirect URI)."""
        redirect_uri = super().validate_authorization_request()
        try:
            _resources(self.request.payload.datalist.get("resource", []))
        except InvalidTargetError as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request) -> None:
        """Store the code with its PKCE challenge and the requested resources."""
        payload = request.payload
        self.server.store_code(
            AuthorizationCode(
                code=code,
                client_id=request.client.get_client_id(),
                redirect_uri=payload.redirect_uri,
                scope=request.scope,
                subject=request.user,
                code_challenge=payload.data["code_challenge"],
                code_challenge_method=payload.data["code_challenge_method"],
                resources=_resources(payload.datalist.get("resource", [])),
                expires_at=time.time() + CODE_LIFETIME,
            )
        )

    def query_authorization_code(self, code: str, client: ClientMixin) -> AuthorizationCode | None:
        """The unexpired code, if it was issued to ``client``."""
        return self.server.find_code(code, client.get_client_id())

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        """Codes are single use."""
        self.server.drop_code(authorization_code.code)

    def authenticate_user(self, authorization_code: AuthorizationCode) -> str:
        """The subject who approved the code."""
        return authorization_code.subject


class RefreshTokenGrant(_ResourceBoundTokens, grants.RefreshTokenGrant):
    """Refresh token grant with rotation (OAuth 2.1 §4.3.1: public clients' tokens must rotate)."""

    TOKEN_ENDPOINT_AUTH_METHODS = _TOKEN_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> IssuedToken | None:
        """The live refresh token record."""
        return self.server.find_refresh_token(refresh_token)

    def authenticate_user(self, refresh_token: IssuedToken) -> str:
        """The subject the refresh token was issued for."""
        return refresh_token.subject

    def revoke_old_credential(self, refresh_token: IssuedToken) -> None:
        """The used refresh token is spent once its successor is issued."""
        refresh_token.revoked = True


class S256CodeChallenge(CodeChallenge):
    """PKCE required on every authorize request, and S256 only (OAuth 2.1 §4.1.1)."""

    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri) -> None:
        """authlib accepts an authorize request without PKCE; OAuth 2.1 with MCP does not."""
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge'")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256")
        super().validate_code_challenge(grant, redirect_uri)


class ServerIssuer(IssuerParameter):
    """RFC 9207: authorization responses carry ``iss``, the issuer of the server it extends."""

    def __call__(self, authorization_server) -> None:
        self.server = authorization_server
        super().__call__(authorization_server)

    def get_issuer(self) -> str:
        """The issuer identifier, as the metadata spells it."""
        return self.server.issuer


# -- endpoints ----------------------------------------------------------------------------


class OpenRegistrationEndpoint(ClientRegistrationEndpoint):
    """RFC 7591 registration without an initial access token (open registration)."""

    def authenticate_token(self, request) -> bool:
        """Anyone may register."""
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        """The metadata registrations are validated against (scopes, grant types, methods)."""
        return self.server.metadata()

    def extract_client_metadata(self, request) -> dict[str, Any]:
        """authlib's validated metadata; a client that names no scope gets every offered scope."""
        metadata = super().extract_client_metadata(request)
        metadata.setdefault("scope", list_to_scope(self.server.scopes_supported))
        return metadata

    def generate_client_secret(self, request) -> str | None:
        """Only clients that authenticate at the token endpoint get a secret."""
        if request.payload.data.get("token_endpoint_auth_method") == "none":
            return None
        return super().generate_client_secret(request)

    def generate_client_info(self, request) -> dict[str, Any]:
        """RFC 7591 §3.2.1 client information; a public client's has no secret members."""
        info = super().generate_client_info(request)
        if info["client_secret"] is None:
            del info["client_secret"], info["client_secret_expires_at"]
        return info

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request) -> Client:
        """Keep the new client."""
        client = Client(client_info["client_id"], client_info.get("client_secret"), dict(client_metadata))
        self.server.add_client(client)
        return client


class JwtIntrospectionEndpoint(IntrospectionEndpoint):
    """RFC 7662 for the resource server's client: access tokens are verified like a resource
    server would (signature by one of this server's keys, issuer, expiry); refresh tokens are
    looked up."""

    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        """The token's record, or None when this server did not issue it (or it is broken)."""
        if token_type_hint != "refresh_token":
            access = self.server.read_access_token(token_string)
            if access is not None or token_type_hint == "access_token":
                return access
        return self.server.find_refresh_token(token_string, live=False)

    def check_permission(self, token: IssuedToken, client: Client, request) -> bool:
        """Only clients registered for introspection may introspect."""
        return client.may_introspect

    def introspect_token(self, token: IssuedToken) -> dict[str, Any]:
        """The RFC 7662 §2.2 members of an active token."""
        answer = {
            "active": True,
            "scope": token.scope,
            "client_id": token.client_id,
            "sub": token.subject,
            "iss": self.server.issuer,
            "exp": token.expires_at,
            "iat": token.issued_at,
            "token_type": token.token_type,
        }
        if token.resources:
            answer["aud"] = token.resources[0] if len(token.resources) == 1 else list(token.resources)
        if token.jti:
            answer["jti"] = token.jti
        return answer


# -- the server -----------------------------------------------------------------------------


class OAuthServer(AuthorizationServer):
    """The authorization server: authlib's Flask ``AuthorizationServer`` with in-memory stores.

    Attributes:
        issuer: ``http://127.0.0.1:<port>``, exactly as the metadata and tokens spell it.
        port: the TCP port.
        subject: the resource owner every authorization is approved for (the ``sub``).
        introspection_client: ``(client_id, client_secret)`` of the confidential client that
            may introspect (HTTP Basic or form parameters).
        request_log: ``(method, path)`` of every request served, in order.
    """

    def __init__(self, scopes: Iterable[str] = DEFAULT_SCOPES, subject: str = "test-user"):
        app = Flask(__name__)
        # query_client and save_token are this class's own methods, so none is passed in.
        super().__init__(app)
        self.scopes_supported = list(scopes)
        self.subject = subject
        self.request_log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._clients: dict[str, Client] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._refresh_tokens: dict[str, IssuedToken] = {}
        self._keys = [SigningKey.generate()]

        self.register_grant(AuthorizationCodeGrant, [S256CodeChallenge(required=True)])
        self.register_grant(RefreshTokenGrant)
        self.register_endpoint(OpenRegistrationEndpoint)
        self.register_endpoint(JwtIntrospectionEndpoint)
        self.register_extension(ServerIssuer())

        secret = secrets.token_urlsafe(24)
        self.introspection_client = (INTROSPECTION_CLIENT_ID, secret)
        self.add_client(
            Client(
                INTROSPECTION_CLIENT_ID,
                secret,
                {
                    "token_endpoint_auth_method": "client_secret_basic",
                    "grant_types": [],
                    "response_types": [],
                },
                may_introspect=True,
            )
        )

        # Port 0: the OS picks a free port while binding, so no other process can take it first.
        self._http = make_server(HOST, 0, app, threaded=True)
        self.port = self._http.server_port
        self.issuer = f"http://{HOST}:{self.port}"
        self._thread: threading.Thread | None = None
        self._routes(app)

    # -- lifecycle

    def start(self) -> OAuthServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._http.serve_forever, name=f"oauth-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join(STOP_TIMEOUT)
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- URLs

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        return self.issuer + path

    @property
    def jwks_url(self) -> str:
        """The ``jwks_uri``."""
        return self.url("/jwks")

    @property
    def introspection_url(self) -> str:
        """The ``introspection_endpoint``."""
        return self.url("/introspect")

    def metadata(self) -> AuthorizationServerMetadata:
        """RFC 8414 metadata (plain http on loopback, so authlib's ``validate()``, which demands
        https, is not applied)."""
        return AuthorizationServerMetadata(
            {
                "issuer": self.issuer,
                "authorization_endpoint": self.url("/authorize"),
                "token_endpoint": self.url("/token"),
                "registration_endpoint": self.url("/register"),
                "jwks_uri": self.jwks_url,
                "introspection_endpoint": self.introspection_url,
                "scopes_supported": self.scopes_supported,
                "response_types_supported": ["code"],
                "response_modes_supported": ["query"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": _TOKEN_AUTH_METHODS,
                "introspection_endpoint_auth_methods_supported": JwtIntrospectionEndpoint.CLIENT_AUTH_METHODS,
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    def _routes(self, app: Flask) -> None:
        @app.before_request
        def log_request():
            # list.append is atomic, so the request threads need no lock for the log.
            self.request_log.append((request.method, request.path))

        @app.get(get_well_known_url(self.issuer))
        def metadata():
            return jsonify(self.metadata())

        @app.get("/jwks")
        def jwks():
            return jsonify(self.jwks())

        @app.post("/register")
        def register():
            return self.create_endpoint_response(OpenRegistrationEndpoint.ENDPOINT_NAME)

        @app.get("/authorize")
        def authorize():
            try:
                grant = self.get_consent_grant(end_user=self.subject)
            except OAuth2Error as error:
                response = self.handle_error_response(None, error)
                # RFC 9207 §2: error redirects carry the issuer too.
                self.execute_hook("after_create_authorization_response", response)
                return response
            # No login or consent page: the test's resource owner approves every request.
            return self.create_authorization_response(grant_user=self.subject, grant=grant)

        @app.post("/token")
        def token():
            return self.create_token_response()

        @app.post("/introspect")
        def introspect():
            return self.create_endpoint_response(JwtIntrospectionEndpoint.ENDPOINT_NAME)

    # -- stores (authlib calls these from the request threads)

    def query_client(self, client_id: str) -> Client | None:
        """The registered client, or None."""
        return self._clients.get(client_id)

    def add_client(self, client: Client) -> None:
        """Register ``client``."""
        with self._lock:
            self._clients[client.client_id] = client

    def store_code(self, code: AuthorizationCode) -> None:
        """Keep an issued authorization code."""
        with self._lock:
            self._codes[code.code] = code

    def find_code(self, code: str, client_id: str) -> AuthorizationCode | None:
        """The unexpired code issued to ``client_id``."""
        with self._lock:
            record = self._codes.get(code)
        if record is None or record.client_id != client_id or time.time() >= record.expires_at:
            return None
        return record

    def drop_code(self, code: str) -> None:
        """Forget a redeemed code."""
        with self._lock:
            self._codes.pop(code, None)

    def save_token(self, token: dict[str, Any], request) -> None:
        """authlib's hook after a token response is built: keep the refresh token, bound to the
        same resources as the grant it came from."""
        if "refresh_token" not in token:
            return
        granted = request.authorization_code or request.refresh_token
        now = int(time.time())
        record = IssuedToken(
            "refresh_token",
            request.client.get_client_id(),
            request.user,
            token["scope"],
            now,
            now + REFRESH_TOKEN_LIFETIME,
            granted.resources,
        )
        with self._lock:
            self._refresh_tokens[token["refresh_token"]] = record

    def find_refresh_token(self, token: str, live: bool = True) -> IssuedToken | None:
        """The refresh token's record; with ``live``, only if neither expired nor rotated."""
        with self._lock:
            record = self._refresh_tokens.get(token)
        if record is None or (live and (record.is_expired() or record.is_revoked())):
            return None
        return record

    # -- keys and access tokens

    @property
    def signing_key(self) -> SigningKey:
        """The key new tokens are signed with."""
        return self._keys[-1]

    def jwks(self) -> dict[str, Any]:
        """The JWK Set: every key this server signed with, newest last."""
        with self._lock:
            keys = list(self._keys)
        return {"keys": [key.public_jwk() for key in keys]}

    def rotate_key(self) -> str:
        """Add a new signing key (its ``kid`` is returned) and sign new tokens with it; the old
        keys stay published, so tokens they signed remain verifiable. A resource server sees
        the new key once it fetches the JWKS again (zemcp: not within ``auth_jwks_cooldown``
        seconds of its last fetch)."""
        key = SigningKey.generate()
        with self._lock:
            self._keys.append(key)
        return key.kid

    def access_token_claims(
        self,
        *,
        client_id: str,
        subject: str,
        scope: str,
        audience: Iterable[str],
        lifetime: int = ACCESS_TOKEN_LIFETIME,
    ) -> dict[str, Any]:
        """The claims of an access token as the token endpoint issues it."""
        audience = list(audience)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "exp": now + lifetime,
            "iat": now,
            "client_id": client_id,
            "scope": scope,
            "jti": uuid.uuid4().hex,
        }
        if audience:
            claims["aud"] = audience[0] if len(audience) == 1 else audience
        return claims

    def sign_access_token(self, **claims: Any) -> str:
        """An access token (RS256 with the current key) with :meth:`access_token_claims`."""
        key = self.signing_key
        return jwt.encode(
            self.access_token_claims(**claims),
            key.private_key,
            algorithm="RS256",
            headers={"kid": key.kid, "typ": "at+jwt"},
        )

    def mint_token(
        self,
        audience: str | Iterable[str] | None = None,
        *,
        scope: str = "mcp",
        client_id: str = "minted-client",
        claims: dict[str, Any] | None = None,
        lifetime: int = ACCESS_TOKEN_LIFETIME,
        kid: Any = _MISSING,
        alg: str = "RS256",
        key: Any = None,
        headers: dict[str, Any] | None = None,
    ) -> str:
        """An access token made directly, for tests of how a resource server treats tokens.

        Args:
            audience: the ``aud`` (a string or several); None leaves it out.
            scope, client_id, lifetime: as for issued tokens (a negative lifetime: expired).
            claims: merged over the issued-token claims; a claim set to None is removed
                (``{"iss": "http://elsewhere"}``, ``{"exp": None}``).
            kid: the ``kid`` header; by default the signing key's, None leaves it out.
            alg: the JWS algorithm; ``none`` makes an unsigned token.
            key: the signing key; by default the current RSA key (RS*/PS* algorithms only).
            headers: further JOSE header members.
        """
        audiences = [audience] if isinstance(audience, str) else list(audience or ())
        payload = self.access_token_claims(
            client_id=client_id, subject=self.subject, scope=scope, audience=audiences, lifetime=lifetime
        )
        for name, value in (claims or {}).items():
            if value is None:
                payload.pop(name, None)
            else:
                payload[name] = value
        if key is None and alg != "none":
            if alg[:2] not in ("RS", "PS"):
                raise ValueError(f"alg {alg} needs an explicit key")
            key = self.signing_key.private_key
        header = {"typ": "at+jwt", **(headers or {})}
        header_kid = self.signing_key.kid if kid is _MISSING else kid
        if header_kid is not None:
            header["kid"] = header_kid
        return jwt.encode(payload, key, algorithm=alg, headers=header)

    def read_access_token(self, token: str) -> IssuedToken | None:
        """The access token as a record, if one of this server's keys signed it (RS256) for
        this issuer and it has not expired; None otherwise."""
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            with self._lock:
                key = next((k for k in self._keys if k.kid == kid), None)
            if key is None:
                return None
            claims = jwt.decode(
                token,
                key.private_key.public_key(),
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"verify_aud": False, "require": ["exp", "iat", "sub"]},
            )
        except jwt.PyJWTError:
            return None
        audience = claims.get("aud", ())
        return IssuedToken(
            "Bearer",
            claims.get("client_id", ""),
            claims["sub"],
            claims.get("scope", ""),
            claims["iat"],
            claims["exp"],
            (audience,) if isinstance(audience, str) else tuple(audience),
            jti=claims.get("jti", ""),
        )


@pytest.fixture
def oauth_server() -> Iterator[OAuthServer]:
    """A running :class:`OAuthServer` for one test, stopped after it whatever happened."""
    with OAuthServer() as server:
        yield server
