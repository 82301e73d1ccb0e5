"""Authorization over real HTTP: zemcp under gunicorn as an OAuth 2.1 resource server.

The test plays the authorization server's part that a resource server talks to: it serves a
real JWKS (RSA keys generated here, rotated in one test) and an RFC 7662 introspection
endpoint on loopback, and mints JWT access tokens with PyJWT. Every token zemcp is shown is
checked by zemcp itself against those endpoints.
"""

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.support.clients import ACCEPT, HandshakeClient, ModernClient
from tests.support.net import HOST, READ_TIMEOUT, free_port

SCOPED_APP = "tests.apps.scoped:app"


class AuthorizationServerSide:
    """The JWKS and introspection endpoints of an authorization server, on 127.0.0.1."""

    def __init__(self):
        self.port = free_port()
        self.issuer = f"http://{HOST}:{self.port}"
        self.jwks_url = f"{self.issuer}/jwks"
        self.introspection_url = f"{self.issuer}/introspect"
        self.keys = {"k1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.signing_kid = "k1"
        #: token -> introspection answer
        self.introspection: dict[str, dict] = {}
        self.introspection_down = False
        #: When set, the JWKS URL answers this HTML page instead (a misconfigured URL).
        self.jwks_page: str | None = None
        #: An EC key published beside the RSA ones, to try an alg that does not fit its kid.
        self.ec_key = ec.generate_private_key(ec.SECP256R1())
        self.jwks_fetches = 0
        #: While set, the JWKS URL answers nothing until :attr:`released` is set (a hanging server).
        self.jwks_hangs = threading.Event()
        self.released = threading.Event()
        self._server = make_server(HOST, self.port, self._app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self):
        self.released.set()
        self._server.shutdown()
        self._thread.join(5)

    @Request.application
    def _app(self, request: Request) -> Response:
        if request.path == "/jwks":
            self.jwks_fetches += 1
            if self.jwks_hangs.is_set():
                self.released.wait(30)
            if self.jwks_page is not None:
                return Response(self.jwks_page, content_type="text/html")
            keys = []
            for kid, key in self.keys.items():
                jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
                keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
            keys.append(
                {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec_key.public_key())), "kid": "ec1", "use": "sig"}
            )
            return Response(json.dumps({"keys": keys}), content_type="application/json")
        if request.path == "/introspect" and request.method == "POST":
            if self.introspection_down:
                return Response("down", status=500)
            if request.authorization is None or (request.authorization.username, request.authorization.password) != (
                "zemcp-rs",
                "rs-secret",
            ):
                return Response(json.dumps({"error": "invalid_client"}), status=401, content_type="application/json")
            answer = self.introspection.get(request.form.get("token", ""), {"active": False})
            return Response(json.dumps(answer), content_type="application/json")
        return Response("not found", status=404)

    def rotate(self) -> str:
        """Publish a new key and sign new tokens with it; returns its kid."""
        kid = f"k{len(self.keys) + 1}"
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.signing_kid = kid
        return kid

    def token(
        self,
        audience: str,
        *,
        subject="alice",
        client_id="client-a",
        scope="mcp",
        expires_in=300,
        issuer=None,
        kid=None,
        key=None,
        algorithm="RS256",
        **claims,
    ) -> str:
        """A JWT access token; every claim can be overridden to make a bad one."""
        now = int(time.time())
        body = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience,
            "client_id": client_id,
            "scope": scope,
            "iat": now,
            "exp": now + expires_in,
            "jti": uuid.uuid4().hex,
            **claims,
        }
        kid = kid or self.signing_kid
        return jwt.encode(body, key or self.keys[kid], algorithm=algorithm, headers={"kid": kid})


@pytest.fixture
def authz():
    side = AuthorizationServerSide()
    yield side
    side.stop()


@pytest.fixture
def jwt_server(start_server, authz):
    return start_server(
        auth="jwt", auth_issuer=authz.issuer, auth_jwks_url=authz.jwks_url, auth_scopes="mcp", auth_jwks_cooldown=0
    )


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def post(url: str, message: dict, headers: dict | None = None, **kw) -> requests.Response:
    return requests.post(url, json=message, timeout=READ_TIMEOUT, headers={"Accept": ACCEPT, **(headers or {})}, **kw)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "auth-test", "version": "1"},
    },
}


def metadata_url(server) -> str:
    return f"{server.base}/.well-known/oauth-protected-resource/mcp"


def challenge_params(response: requests.Response) -> dict:
    """The parameters of a ``WWW-Authenticate: Bearer k="v", ...`` header."""
    value = response.headers["WWW-Authenticate"]
    assert value.startswith("Bearer "), value
    params = {}
    for part in value[len("Bearer ") :].split(", "):
        name, _, quoted = part.partition("=")
        params[name] = quoted.strip('"')
    return params


def session(url: str, token: str) -> HandshakeClient:
    """A handshake-era session (2025-06-18, the elicitation capability) whose every request
    carries ``token``; initialize and notifications/initialized must succeed."""
    client = HandshakeClient(url, "auth-test", "1", headers=bearer(token))
    r = client.initialize()
    assert r.status_code == 200, r.text
    return client


def test_protected_resource_metadata_names_the_resource_and_the_authorization_server(jwt_server, authz):
    """RFC 9728 at the path-inserted well-known URL, served without a token."""
    r = requests.get(metadata_url(jwt_server), timeout=READ_TIMEOUT)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    document = r.json()
    assert document["resource"] == jwt_server.url
    assert document["authorization_servers"] == [authz.issuer]
    assert document["scopes_supported"] == ["mcp"]
    assert document["bearer_methods_supported"] == ["header"]


def test_a_request_without_a_token_is_challenged(jwt_server):
    """401 with the metadata URL and the scope every request needs, no error code (RFC 6750 3.1)."""
    r = post(jwt_server.url, INIT)
    assert r.status_code == 401
    assert challenge_params(r) == {"resource_metadata": metadata_url(jwt_server), "scope": "mcp"}
    # A token in the query string is never read (MCP forbids it).
    token_url = f"{jwt_server.url}?access_token=anything"
    assert post(token_url, INIT).status_code == 401


@pytest.mark.parametrize(
    "bad",
    [
        "expired",
        "wrong audience",
        "wrong issuer",
        "alg none",
        "unknown kid",
        "foreign signature",
        "HS256 with the public key",
        "not a JWT",
        "no sub",
        "RS256 naming the EC key",
        "20 KB of text",
    ],
)
def test_refused_tokens_get_invalid_token(jwt_server, authz, bad):
    """Each kind of unusable token gets 401 invalid_token, and never reaches the MCP layer."""
    aud = jwt_server.url
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        authz.keys["k1"]
        .public_key()
        .public_bytes(encoding=serialization.Encoding.PEM, format=serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    tokens = {
        "expired": lambda: authz.token(aud, expires_in=-120),
        "wrong audience": lambda: authz.token("http://127.0.0.1:1/mcp"),
        "wrong issuer": lambda: authz.token(aud, issuer="http://127.0.0.1:1"),
        "alg none": lambda: jwt.encode(
            {"iss": authz.issuer, "sub": "alice", "aud": aud, "scope": "mcp", "exp": int(time.time()) + 300},
            None,
            algorithm="none",
            headers={"kid": "k1"},
        ),
        "unknown kid": lambda: authz.token(aud, kid="nope", key=other_key),
        "foreign signature": lambda: authz.token(aud, kid="k1", key=other_key),
        "HS256 with the public key": lambda: _hs256(
            public_pem, {"iss": authz.issuer, "sub": "alice", "aud": aud, "scope": "mcp", "exp": int(time.time()) + 300}
        ),
        "not a JWT": lambda: "opaque-" + uuid.uuid4().hex,
        "no sub": lambda: _without(authz, aud, "sub"),
        "RS256 naming the EC key": lambda: authz.token(aud, kid="ec1", key=authz.keys["k1"]),
        # Tokens of providers that list groups are large: such a header is read, not refused with 431.
        "20 KB of text": lambda: "x" * 20_000,
    }
    r = post(jwt_server.url, INIT, bearer(tokens[bad]()))
    assert r.status_code == 401, r.text
    params = challenge_params(r)
    assert params["error"] == "invalid_token" and params["resource_metadata"] == metadata_url(jwt_server)
    assert "Mcp-Session-Id" not in r.headers
    assert "Traceback" not in jwt_server.log()


def test_an_unusable_jwks_is_a_503_not_a_crash(jwt_server, authz):
    """A JWKS URL that answers HTML (a wrong URL) leaves tokens unverifiable: 503, logged."""
    authz.jwks_page = "<html>login</html>"
    r = post(jwt_server.url, INIT, bearer(authz.token(jwt_server.url)))
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1, r.text
    assert "JWKS" in r.json()["error"]["message"]
    assert "not JSON" in jwt_server.log() and "Traceback" not in jwt_server.log()


def test_a_hanging_jwks_holds_no_request_whose_key_is_known(start_server, authz):
    """While the JWKS URL hangs (its refresh due), tokens of known keys are served at once,
    pings and calls alike; a token of an unknown key gets a fast 503 with Retry-After, during
    the fetch and while fetching is backed off after it failed; the rotated key works once the
    authorization server answers again."""
    server = start_server(
        auth="jwt",
        auth_issuer=authz.issuer,
        auth_jwks_url=authz.jwks_url,
        auth_scopes="mcp",
        auth_jwks_lifespan=1,
        auth_jwks_cooldown=0,
        auth_timeout=2,
    )
    client = session(server.url, authz.token(server.url))
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    authz.jwks_hangs.set()
    time.sleep(1.2)  # the keys are due: the next request starts a refresh that hangs

    def timed(send) -> tuple[requests.Response, float]:
        started = time.monotonic()
        response = send()
        return response, time.monotonic() - started

    for _ in range(3):
        r, took = timed(lambda: post(server.url, ping, client.headers()))
        assert r.status_code == 200 and took < 1, (r.status_code, took)
        r, took = timed(lambda: client.call_tool("ze_execute", {"command": "help"})[1])
        assert r.status_code == 200 and took < 1, (r.status_code, took)
    fetches = authz.jwks_fetches
    new_kid = authz.rotate()
    unknown = authz.token(server.url, kid=new_kid)
    for why in ("are being fetched", "could not be fetched (unreachable)"):
        # During the hanging fetch, then (it timed out) while fetching is backed off after it.
        r, took = timed(lambda: post(server.url, INIT, bearer(unknown)))
        assert r.status_code == 503 and took < 1, (r.status_code, took, r.text)
        assert int(r.headers["Retry-After"]) >= 1 and why in r.json()["error"]["message"], r.text
        deadline = time.monotonic() + 10
        while "cannot fetch the JWKS" not in server.log():
            assert time.monotonic() < deadline, "the hanging fetch was not given up"
            time.sleep(0.1)
    assert authz.jwks_fetches == fetches, "one fetch at a time, none while backed off"
    known, took = timed(lambda: post(server.url, ping, client.headers()))
    assert known.status_code == 200 and took < 1
    authz.jwks_hangs.clear()
    authz.released.set()
    deadline = time.monotonic() + 10
    while (r := post(server.url, INIT, bearer(unknown))).status_code == 503:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.5)
    assert r.status_code == 200, r.text
    assert "Traceback" not in server.log()


def test_a_token_sent_without_its_scheme_is_not_echoed(jwt_server, authz):
    token = authz.token(jwt_server.url)
    r = post(jwt_server.url, INIT, {"Authorization": token})
    assert r.status_code == 401 and token[:20] not in r.text


def _hs256(secret: bytes, claims: dict) -> str:
    # PyJWT refuses to sign HMAC with a PEM key; build the token by hand, as an attacker would.
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


def _without(authz, aud: str, claim: str) -> str:
    now = int(time.time())
    claims = {"iss": authz.issuer, "sub": "alice", "aud": aud, "scope": "mcp", "iat": now, "exp": now + 300}
    claims.pop(claim)
    return jwt.encode(claims, authz.keys["k1"], algorithm="RS256", headers={"kid": "k1"})


def test_a_token_without_the_servers_scope_is_forbidden(jwt_server, authz):
    """403 insufficient_scope naming the scope, so that the client can step up (2025-11-25)."""
    r = post(jwt_server.url, INIT, bearer(authz.token(jwt_server.url, scope="profile")))
    assert r.status_code == 403
    params = challenge_params(r)
    assert params["error"] == "insufficient_scope" and params["scope"] == "mcp"


def test_a_valid_token_serves_both_eras_and_keys_rotate(jwt_server, authz):
    """Handshake and 2026-07-28 calls with a token; a token of a newly published key works."""
    client = session(jwt_server.url, authz.token(jwt_server.url))
    r = client.call_tool("ze_execute", {"command": "help"})[1]
    assert r.status_code == 200 and "server status" in r.json()["result"]["content"][0]["text"]
    modern = ModernClient(jwt_server.url)
    result = modern.call_result({"command": "help"}, headers=bearer(authz.token(jwt_server.url)))
    assert "server status" in result["content"][0]["text"]
    authz.rotate()
    rotated = session(jwt_server.url, authz.token(jwt_server.url))
    assert rotated.call_tool("ze_execute", {"command": "help"})[1].status_code == 200
    assert authz.jwks_fetches >= 2


def test_a_session_cannot_be_used_with_another_principals_token(jwt_server, authz):
    """Bob's token on Alice's session id is answered like an unknown session, also for DELETE
    and for an elicitation answer, which never reaches Alice's waiting handler."""
    alice = session(jwt_server.url, authz.token(jwt_server.url, subject="alice"))
    bob_token = bearer(authz.token(jwt_server.url, subject="bob", client_id="client-b"))
    bob_headers = alice.headers(bob_token)
    r = alice.call_tool("ze_execute", {"command": "help"}, headers=bob_token)[1]
    assert r.status_code == 404 and "Session not found" in r.json()["error"]["message"]
    _, response, stream = alice.open_call("ze_execute", {})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    ask = stream.next_message()
    assert ask["method"] == "elicitation/create"
    answer = {
        "jsonrpc": "2.0",
        "id": ask["id"],
        "result": {"action": "accept", "content": {"command": "server status"}},
    }
    assert post(jwt_server.url, answer, bob_headers).status_code == 404
    assert requests.delete(jwt_server.url, headers=bob_headers, timeout=READ_TIMEOUT).status_code == 404
    # Alice's own answer still resolves her call: Bob's never reached the waiter.
    answer["result"]["content"]["command"] = "help"
    assert post(jwt_server.url, answer, alice.headers()).status_code == 202
    final = stream.next_message()
    assert "server status" in final["result"]["content"][0]["text"]
    stream.close()
    assert "belongs to another principal" in jwt_server.log()
    # The same subject through a fresh token (a refresh) keeps the session.
    refreshed = bearer(authz.token(jwt_server.url, subject="alice"))
    assert alice.call_tool("ze_execute", {"command": "help"}, headers=refreshed)[1].status_code == 200


def test_initialize_does_not_tell_whether_another_principals_session_is_live(jwt_server, authz):
    """initialize with Alice's live session id under Bob's token is answered as with an ended
    id: a new session of Bob's, not the 400 that only Alice gets for her own live session."""
    alice_token = authz.token(jwt_server.url, subject="alice")
    alice = session(jwt_server.url, alice_token)
    ended = session(jwt_server.url, authz.token(jwt_server.url, subject="alice"))
    assert ended.delete().status_code == 204
    bob = bearer(authz.token(jwt_server.url, subject="bob", client_id="client-b"))
    answers = [
        post(jwt_server.url, INIT, {**bob, "Mcp-Session-Id": sid}) for sid in (alice.session_id, ended.session_id)
    ]
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    assert {r.headers["Mcp-Session-Id"] for r in answers}.isdisjoint({alice.session_id, ended.session_id})
    assert answers[0].json()["result"].keys() == answers[1].json()["result"].keys()
    # Alice's session is untouched, and her own initialize on it is still refused.
    assert alice.call_tool("ze_execute", {"command": "help"})[1].status_code == 200
    again = post(jwt_server.url, INIT, {**bearer(alice_token), "Mcp-Session-Id": alice.session_id})
    assert again.status_code == 400 and "already initialized" in again.json()["error"]["message"]


def test_session_list_shows_only_the_principals_own_sessions(jwt_server, authz):
    """With authorization on, session list shows every session of the caller's principal (from
    a session or a 2026-07-28 request) and none of another principal's."""
    alice = [session(jwt_server.url, authz.token(jwt_server.url, subject="alice")) for _ in range(2)]
    bob_token = authz.token(jwt_server.url, subject="bob", client_id="client-b")
    bob = session(jwt_server.url, bob_token)

    def listing(client: HandshakeClient) -> str:
        r = client.call_tool("ze_execute", {"command": "session list"})[1]
        assert r.status_code == 200, r.text
        return r.json()["result"]["content"][0]["text"]

    mine = listing(alice[0]).splitlines()
    assert mine[0].startswith("2 session(s) in process") and mine[0].endswith("are yours (3 in all):"), mine
    assert [line[0] for line in mine[1:]] == ["*", " "], mine
    assert listing(bob).splitlines()[0].startswith("1 session(s) in process"), listing(bob)
    stateless = ModernClient(jwt_server.url).call_result({"command": "session list"}, headers=bearer(bob_token))
    assert stateless["content"][0]["text"].startswith("1 session(s) in process"), stateless


def test_scopes_per_tool_prompt_and_resource(start_server, authz):
    """Lists show what the token's scopes allow; using the rest is 403 with every scope it needs."""
    server = start_server(
        app=SCOPED_APP, auth="jwt", auth_issuer=authz.issuer, auth_jwks_url=authz.jwks_url, auth_scopes="mcp"
    )
    document = requests.get(metadata_url(server), timeout=READ_TIMEOUT).json()
    assert document["scopes_supported"] == ["mcp", "deploy:write", "prompts:read", "files:read"]
    plain = session(server.url, authz.token(server.url, scope="mcp"))
    tools = post(server.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, plain.headers()).json()
    assert [t["name"] for t in tools["result"]["tools"]] == ["whoami"]
    rid, r = plain.call_tool("deploy", {"target": "prod"})
    assert r.status_code == 403
    params = challenge_params(r)
    assert params["error"] == "insufficient_scope" and params["scope"] == "mcp deploy:write"
    assert r.json()["id"] == rid and "deploy:write" in r.json()["error"]["message"]
    prompts = post(server.url, {"jsonrpc": "2.0", "id": 4, "method": "prompts/list"}, plain.headers()).json()
    assert prompts["result"]["prompts"] == []
    read = post(
        server.url,
        {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "test://secret"}},
        plain.headers(),
    )
    assert read.status_code == 403 and challenge_params(read)["scope"] == "mcp files:read"
    # Its updates would tell of a resource the token may not read: subscribing needs the scope too.
    subscribe = {"jsonrpc": "2.0", "id": 6, "method": "resources/subscribe", "params": {"uri": "test://secret"}}
    refused = post(server.url, subscribe, plain.headers())
    assert refused.status_code == 403 and challenge_params(refused)["scope"] == "mcp files:read"
    # A broader scope covers the narrower one (deploy covers deploy:write).
    broad = session(server.url, authz.token(server.url, scope="mcp deploy files"))
    assert post(server.url, subscribe, broad.headers()).json()["result"] == {}
    r = broad.call_tool("deploy", {"target": "prod"})[1]
    assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "deployed prod"
    who = broad.call_tool("whoami", {})[1].json()["result"]["content"][0]["text"]
    assert who == "alice via client-a with deploy files mcp"


def test_request_state_is_bound_to_the_principal(start_server, authz):
    """A 2026-07-28 requestState Alice got opens for Alice only."""
    server = start_server(app=SCOPED_APP, auth="jwt", auth_issuer=authz.issuer, auth_jwks_url=authz.jwks_url)
    client = ModernClient(server.url)
    alice = bearer(authz.token(server.url, subject="alice"))
    bob = bearer(authz.token(server.url, subject="bob"))
    first = client.call_result({"ask": True}, name="whoami", headers=alice)
    assert first["resultType"] == "input_required", first
    responses = {key: {"action": "accept", "content": {"word": "hi"}} for key in first["inputRequests"]}
    _, stolen = client.call(
        {"ask": True}, name="whoami", input_responses=responses, request_state=first["requestState"], headers=bob
    )
    assert stolen["error"]["code"] == -32602 and stolen["error"]["data"]["reason"] == "invalid_request_state"
    done = client.call_result(
        {"ask": True}, name="whoami", input_responses=responses, request_state=first["requestState"], headers=alice
    )
    assert done["content"][0]["text"] == "alice via client-a with mcp hi"


@pytest.fixture
def introspection_server(start_server, authz):
    return start_server(
        auth="introspection",
        auth_issuer=authz.issuer,
        auth_introspection_url=authz.introspection_url,
        auth_client_id="zemcp-rs",
        auth_client_secret="rs-secret",
        auth_introspection_cache=0,
    )


def test_opaque_tokens_by_introspection(introspection_server, authz):
    """Active tokens for this resource pass; inactive or foreign ones get 401; a down endpoint 503."""
    url = introspection_server.url
    now = int(time.time())
    authz.introspection["good"] = {
        "active": True,
        "sub": "carol",
        "client_id": "c",
        "scope": "mcp",
        "aud": url,
        "iss": authz.issuer,
        "exp": now + 300,
    }
    authz.introspection["foreign"] = {**authz.introspection["good"], "aud": "https://elsewhere.example/mcp"}
    authz.introspection["revoked"] = {"active": False}
    assert session(url, "good").call_tool("ze_execute", {"command": "help"})[1].status_code == 200
    for token in ("foreign", "revoked", "unknown"):
        r = post(url, INIT, bearer(token))
        assert r.status_code == 401 and challenge_params(r)["error"] == "invalid_token", (token, r.text)
    authz.introspection_down = True
    r = post(url, INIT, bearer("good"))
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"


def test_a_browser_page_can_read_the_challenge(jwt_server):
    """A 401 to an allowed origin carries the CORS headers that let the page read WWW-Authenticate."""
    origin = "http://localhost:5173"
    r = post(jwt_server.url, INIT, {"Origin": origin})
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == origin
    assert "WWW-Authenticate" in r.headers["Access-Control-Expose-Headers"]
    preflight = requests.options(
        jwt_server.url,
        timeout=READ_TIMEOUT,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    assert preflight.status_code == 204 and preflight.headers["Access-Control-Allow-Headers"] == "authorization"


def test_fair_shares_belong_to_the_principal_not_the_address(jwt_server, authz):
    """With authorization on, one user's sessions hold at most its share (3 of the 4 standalone
    streams at 32 threads), whichever OAuth client each token was issued to, and its next GET
    is told to come back; another user from the same address still gets a stream."""
    opened = []
    for n in range(4):
        client = session(jwt_server.url, authz.token(jwt_server.url, subject="alice", client_id=f"client-{n}"))
        response = requests.get(
            jwt_server.url,
            headers=client.headers({"Accept": "text/event-stream", "Content-Type": None}),
            stream=True,
            timeout=READ_TIMEOUT,
        )
        assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/event-stream")
        opened.append(response)
    first_lines = [next(r.iter_lines()) for r in opened]
    assert [line.startswith(b"id: ") for line in first_lines] == [True, True, True, False], first_lines
    refusal = first_lines[3].decode()
    assert refusal.startswith(": ") and "principal" in refusal and "alice" in refusal, refusal
    assert "ZEMCP_CLIENT_SHARE" in refusal, refusal
    bob = session(jwt_server.url, authz.token(jwt_server.url, subject="bob", client_id="client-b"))
    with requests.get(
        jwt_server.url,
        headers=bob.headers({"Accept": "text/event-stream", "Content-Type": None}),
        stream=True,
        timeout=READ_TIMEOUT,
    ) as response:
        assert next(response.iter_lines()).startswith(b"id: ")
    for response in opened:
        response.close()


def test_rate_limits_belong_to_the_principal_not_the_address(start_server, authz):
    """With authorization on and ZEMCP_RATE_LIMIT=2/minute, Alice's bucket is hers whichever
    OAuth client her tokens were issued to: her third call is refused naming the limit; Bob,
    from the same address, is served."""
    server = start_server(
        auth="jwt", auth_issuer=authz.issuer, auth_jwks_url=authz.jwks_url, auth_scopes="mcp", rate_limit="2/minute"
    )
    client = ModernClient(server.url)
    alice = [bearer(authz.token(server.url, subject="alice", client_id=f"client-{n}")) for n in range(3)]
    assert [client.call({"command": "help"}, headers=headers)[0].status_code for headers in alice] == [200, 200, 429]
    response, reply = client.call({"command": "help"}, headers=alice[0])
    assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1, response.text
    assert "rate limit (2/minute, ZEMCP_RATE_LIMIT)" in reply["error"]["message"], reply
    bob = bearer(authz.token(server.url, subject="bob", client_id="client-0"))
    assert client.call({"command": "help"}, headers=bob)[0].status_code == 200
