"""OAuth 2.1 end to end: the MCP Python SDK's OAuth client against zemcp with ``auth=jwt``.

zemcp runs under real gunicorn as an OAuth resource server whose authorization server is
:class:`~tests.support.oauth_server.OAuthServer` (authlib, in a thread of the test). The
SDK client (``mcp.client.auth.OAuthClientProvider`` as the ``httpx2`` auth of the transport)
starts without a token, so its first request is answered 401; it then discovers the
protected resource metadata (RFC 9728) and the authorization server metadata (RFC 8414),
registers itself (RFC 7591), runs the authorization code flow with PKCE and the RFC 8707
``resource``, and repeats its request with the access token. The elicitation that follows
(``ze_execute`` without ``command``) runs on the authorized connection.

The user agent of the flow is the SDK's conformance-client pattern: the redirect handler
fetches the authorize URL itself without following the redirect and reads ``code``,
``state`` and ``iss`` from its ``Location``; the callback handler hands them back.

The first test checks the authorization server on its own, by hand, over ``requests``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
import mcp
import pytest
import requests
from mcp import types
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.support.clients import ACCEPT, CLIENT_VERSION
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.oauth_server import OAuthServer

#: Where the test client says it receives the authorization response; nothing listens
#: there, as the redirect handler reads the redirect instead of following it.
REDIRECT_URI = "http://127.0.0.1/callback"
#: [seconds] bound on each whole SDK client scenario.
SCENARIO_TIMEOUT = 60
TIMEOUTS = (CONNECT_TIMEOUT, READ_TIMEOUT)


# -- helpers --------------------------------------------------------------------------------


def pkce_pair() -> tuple[str, str]:
    """A PKCE ``(code_verifier, S256 code_challenge)`` (RFC 7636 §4.1-4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def verify_access_token(token: str, auth: OAuthServer, audience: str) -> dict:
    """The claims of ``token`` after checking it against the published JWKS, like a resource server."""
    jwks = requests.get(auth.jwks_url, timeout=TIMEOUTS).json()
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "RS256" and header.get("kid"), header
    key = jwt.PyJWKSet.from_dict(jwks)[header["kid"]]
    return jwt.decode(
        token,
        key,
        algorithms=["RS256"],
        audience=audience,
        issuer=auth.issuer,
        options={"require": ["iss", "sub", "aud", "exp", "iat", "client_id", "scope", "jti"]},
    )


def challenge_params(header: str) -> dict[str, str]:
    """The ``name="value"`` parameters of a ``Bearer`` WWW-Authenticate challenge."""
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', header))


class MemoryTokenStorage:
    """The SDK's ``TokenStorage`` in memory; the test reads the token and registration back."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens."""
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store tokens."""
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored registration."""
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the registration."""
        self.client_info = client_info


def run_authorized_client(url: str, mode: str) -> dict:
    """``mcp.Client`` with the SDK's OAuth provider: call ze_execute ``{}`` and answer the
    elicitation with ``help``; returns the result, the elicitations, the authorization
    responses and the token storage."""
    storage = MemoryTokenStorage()
    authorization_responses: list[dict[str, list[str]]] = []
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append(params)
        return types.ElicitResult(action="accept", content={"command": "help"})

    async def scenario():
        # The resource owner's user agent: a client of its own, so the authorization request
        # travels without the MCP connection's auth.
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(READ_TIMEOUT)) as user_agent:

            async def redirect_handler(authorization_url: str) -> None:
                response = await user_agent.get(authorization_url, follow_redirects=False)
                assert response.status_code == 302, (response.status_code, response.text)
                authorization_responses.append(parse_qs(urlsplit(response.headers["location"]).query))

            async def callback_handler() -> AuthorizationCodeResult:
                answer = authorization_responses[-1]
                return AuthorizationCodeResult(
                    code=answer["code"][0], state=answer.get("state", [None])[0], iss=answer.get("iss", [None])[0]
                )

            provider = OAuthClientProvider(
                server_url=url,
                client_metadata=OAuthClientMetadata(
                    client_name="zemcp-oauth-tests",
                    redirect_uris=[REDIRECT_URI],
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    # A public client, as MCP clients are: PKCE instead of a secret.
                    token_endpoint_auth_method="none",
                ),
                storage=storage,
                redirect_handler=redirect_handler,
                callback_handler=callback_handler,
            )
            http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(READ_TIMEOUT, read=30))
            async with (
                http,
                mcp.Client(
                    streamable_http_client(url, http_client=http),
                    mode=mode,
                    client_info=types.Implementation(name="zemcp-oauth-sdk", version="1.0"),
                    elicitation_callback=on_elicit,
                    read_timeout_seconds=20,
                ) as client,
            ):
                return await client.call_tool("ze_execute", {})

    result = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    return {
        "result": result,
        "elicitations": elicitations,
        "authorization_responses": authorization_responses,
        "storage": storage,
    }


# -- the authorization server on its own ------------------------------------------------------


@pytest.fixture
def http() -> Iterator[requests.Session]:
    """A ``requests`` session, closed after the test."""
    with requests.Session() as session:
        yield session


def test_authorization_server_issues_resource_bound_jwts(oauth_server, http):
    """Metadata, open registration, PKCE-S256-only code flow with ``resource``, JWT access tokens
    verifiable with the JWKS, introspection, refresh with rotation, key rotation, minted tokens."""
    auth = oauth_server
    resource = "http://127.0.0.1:1/mcp"

    metadata = http.get(auth.url("/.well-known/oauth-authorization-server"), timeout=TIMEOUTS).json()
    assert metadata["issuer"] == auth.issuer and not auth.issuer.endswith("/"), metadata
    for endpoint in (
        "authorization_endpoint",
        "token_endpoint",
        "registration_endpoint",
        "jwks_uri",
        "introspection_endpoint",
    ):
        assert metadata[endpoint].startswith(auth.issuer + "/"), metadata
    assert metadata["code_challenge_methods_supported"] == ["S256"], metadata
    assert {"none", "client_secret_basic"} <= set(metadata["token_endpoint_auth_methods_supported"]), metadata
    assert metadata["response_types_supported"] == ["code"], metadata
    assert "authorization_code" in metadata["grant_types_supported"], metadata
    assert metadata["scopes_supported"] == ["mcp"], metadata

    registration = http.post(
        metadata["registration_endpoint"],
        timeout=TIMEOUTS,
        json={
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "scope": "mcp",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "client_name": "by hand",
        },
    )
    assert registration.status_code == 201, registration.text
    client = registration.json()
    assert client["client_id"] and "client_secret" not in client, client

    def authorize(challenge: str | None, state: str) -> dict[str, str]:
        query = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": REDIRECT_URI,
            "scope": "mcp",
            "state": state,
            "resource": resource,
        }
        if challenge:
            query.update(code_challenge=challenge, code_challenge_method="S256")
        response = http.get(metadata["authorization_endpoint"], params=query, allow_redirects=False, timeout=TIMEOUTS)
        assert response.status_code == 302, (response.status_code, response.text)
        location = response.headers["Location"]
        assert location.startswith(REDIRECT_URI + "?"), location
        return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}

    def redeem(code: str, verifier: str, **extra) -> requests.Response:
        return http.post(
            metadata["token_endpoint"],
            timeout=TIMEOUTS,
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_URI,
                "client_id": client["client_id"],
                "code_verifier": verifier,
                "resource": resource,
                **extra,
            },
        )

    # PKCE is required: without a challenge the answer is an error redirect.
    refused = authorize(None, "s0")
    assert refused["error"] == "invalid_request" and refused["state"] == "s0", refused
    assert refused["iss"] == auth.issuer, refused

    verifier, challenge = pkce_pair()
    answer = authorize(challenge, "s1")
    assert answer["state"] == "s1" and answer["iss"] == auth.issuer and answer["code"], answer
    wrong = redeem(answer["code"], pkce_pair()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant", wrong.text
    # A token request may not name a resource the authorization did not grant (RFC 8707 §2.2).
    elsewhere = http.post(
        metadata["token_endpoint"],
        timeout=TIMEOUTS,
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client["client_id"],
            "code_verifier": verifier,
            "resource": "http://127.0.0.1:2/mcp",
        },
    )
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target", elsewhere.text

    issued = redeem(answer["code"], verifier)
    assert issued.status_code == 200, issued.text
    tokens = issued.json()
    assert tokens["token_type"] == "Bearer" and tokens["scope"] == "mcp" and tokens["refresh_token"], tokens
    claims = verify_access_token(tokens["access_token"], auth, resource)
    assert claims["aud"] == resource and claims["scope"] == "mcp", claims
    assert claims["client_id"] == client["client_id"] and claims["sub"] == auth.subject, claims
    assert claims["exp"] > claims["iat"], claims
    # Codes are single use.
    assert redeem(answer["code"], verifier).status_code == 400

    introspect_url = metadata["introspection_endpoint"]
    assert http.post(introspect_url, data={"token": tokens["access_token"]}, timeout=TIMEOUTS).status_code == 401
    introspection = http.post(
        introspect_url, data={"token": tokens["access_token"]}, auth=auth.introspection_client, timeout=TIMEOUTS
    ).json()
    assert introspection["active"] is True, introspection
    for name in ("aud", "scope", "exp", "iss", "sub", "client_id"):
        assert introspection[name] == claims[name], (name, introspection, claims)

    # After a key rotation new tokens carry the new kid; the JWKS keeps the old key.
    old_kid = jwt.get_unverified_header(tokens["access_token"])["kid"]
    new_kid = auth.rotate_key()
    kids = [key["kid"] for key in http.get(auth.jwks_url, timeout=TIMEOUTS).json()["keys"]]
    assert kids == [old_kid, new_kid], kids
    refreshed = http.post(
        metadata["token_endpoint"],
        timeout=TIMEOUTS,
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client["client_id"],
            "resource": resource,
        },
    )
    assert refreshed.status_code == 200, refreshed.text
    renewed = refreshed.json()
    assert jwt.get_unverified_header(renewed["access_token"])["kid"] == new_kid
    assert verify_access_token(renewed["access_token"], auth, resource)["aud"] == resource
    # The refresh token rotated: the spent one is refused.
    replay = http.post(
        metadata["token_endpoint"],
        timeout=TIMEOUTS,
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client["client_id"],
        },
    )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant", replay.text

    # Minted tokens: signed like issued ones unless told otherwise; the introspection vouches
    # only for tokens its own keys signed.
    minted = auth.mint_token(resource, scope="mcp other")
    assert verify_access_token(minted, auth, resource)["scope"] == "mcp other"
    for forged in (
        auth.mint_token(resource, kid="unknown"),
        auth.mint_token(resource, lifetime=-60),
        auth.mint_token(resource, alg="none"),
    ):
        verdict = http.post(
            introspect_url, data={"token": forged}, auth=auth.introspection_client, timeout=TIMEOUTS
        ).json()
        assert verdict == {"active": False}, (forged, verdict)

    assert ("POST", "/register") in auth.request_log and ("POST", "/introspect") in auth.request_log


# -- the SDK client against zemcp -----------------------------------------------------------


def auth_settings(auth: OAuthServer, verification: str) -> dict[str, str]:
    """zemcp's settings for checking tokens of ``auth`` by ``jwt`` (JWKS) or ``introspection``."""
    if verification == "jwt":
        return {"auth": "jwt", "auth_issuer": auth.issuer, "auth_jwks_url": auth.jwks_url, "auth_scopes": "mcp"}
    client_id, client_secret = auth.introspection_client
    return {
        "auth": "introspection",
        "auth_issuer": auth.issuer,
        "auth_introspection_url": auth.introspection_url,
        "auth_client_id": client_id,
        "auth_client_secret": client_secret,
        "auth_scopes": "mcp",
    }


#: How zemcp checks tokens, and how the client picks the protocol era.
SCENARIOS = [("jwt", "auto"), ("jwt", "legacy"), ("introspection", "auto")]


@pytest.mark.parametrize(("verification", "mode"), SCENARIOS, ids=["-".join(s) for s in SCENARIOS])
def test_sdk_oauth_client_authorizes_and_completes_eliciting_call(
    start_server,
    oauth_server,
    verification,
    mode,
):
    """Unauthenticated requests are challenged; the SDK client authorizes itself at the
    authorization server and completes an eliciting tools/call with a token for this resource.

    ``auto`` probes ``server/discover`` (the stateless era, elicitation by round trips);
    ``legacy`` initializes a session, opens the GET stream and answers a pushed elicitation,
    so every HTTP method of the transport goes through the token check. zemcp verifies the
    token itself with the JWKS (``jwt``) or asks the introspection endpoint.
    """
    auth = oauth_server
    server = start_server(**auth_settings(auth, verification))
    resource = server.url
    metadata_url = f"{server.base}/.well-known/oauth-protected-resource/mcp"

    # Without a token: 401 with the RFC 9728 pointer to the protected resource metadata.
    refused = requests.post(
        server.url,
        timeout=TIMEOUTS,
        headers={"Accept": ACCEPT},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": CLIENT_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "no-token", "version": "1.0"},
            },
        },
    )
    assert refused.status_code == 401, (refused.status_code, refused.headers, refused.text)
    challenge = refused.headers.get("WWW-Authenticate", "")
    assert challenge_params(challenge) == {"resource_metadata": metadata_url, "scope": "mcp"}, challenge

    prm = requests.get(metadata_url, timeout=TIMEOUTS)
    assert prm.status_code == 200, (prm.status_code, prm.text)
    prm = prm.json()
    assert prm["resource"] == resource and prm["authorization_servers"] == [auth.issuer], prm
    assert "mcp" in prm["scopes_supported"] and prm["bearer_methods_supported"] == ["header"], prm

    seen = run_authorized_client(server.url, mode)

    result = seen["result"]
    assert result.is_error is False, result
    assert "server status" in result.content[0].text, result.content[0].text
    assert len(seen["elicitations"]) == 1, seen["elicitations"]
    assert "command" in seen["elicitations"][0].requested_schema["properties"], seen["elicitations"]

    # One registration, one authorization, one token request, in that order.
    flow = [entry for entry in auth.request_log if entry[1] in ("/register", "/authorize", "/token")]
    assert flow == [("POST", "/register"), ("GET", "/authorize"), ("POST", "/token")], auth.request_log
    (answer,) = seen["authorization_responses"]
    assert answer["iss"] == [auth.issuer], answer
    # zemcp checked the token with the authorization server's help.
    consulted = ("GET", "/jwks") if verification == "jwt" else ("POST", "/introspect")
    assert consulted in auth.request_log, auth.request_log

    storage = seen["storage"]
    claims = verify_access_token(storage.tokens.access_token, auth, resource)
    assert claims["aud"] == resource, claims
    assert claims["client_id"] == storage.client_info.client_id, (claims, storage.client_info)
    assert "mcp" in claims["scope"].split(), claims
