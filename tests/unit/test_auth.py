"""Authorization pieces without HTTP: scopes, challenges, settings (zemcp.auth, zemcp.config)."""

import logging

import pytest

import zemcp
from zemcp.auth import Authorization, Challenge, InvalidToken, JwtVerifier, Principal
from zemcp.config import Settings


class Table:
    """A verifier over a fixed table of tokens."""

    def __init__(self, principals):
        self.principals = principals

    def verify(self, token):
        if token not in self.principals:
            raise InvalidToken("unknown token")
        return self.principals[token]


AUTH = Authorization(
    Table({"a": Principal("alice", scopes=frozenset({"mcp"})), "n": Principal("nobody")}),
    resource="https://mcp.example.com/mcp",
    authorization_servers=["https://as.example.com"],
    scopes=["mcp", "offline_access"],
)


def test_broader_scopes_cover_narrower_ones():
    p = Principal("alice", scopes=frozenset({"files", "deploy:write"}))
    assert p.missing(["files:read", "files:write:all", "deploy:write", "deploy", "deploy:read", "filesystem"]) == [
        "deploy",
        "deploy:read",
        "filesystem",
    ]


def test_principal_key_is_issuer_subject_and_client_not_the_token():
    assert Principal("s", "c", "i", frozenset({"a"})).key == Principal("s", "c", "i", frozenset({"b"})).key
    assert Principal("s", "c", "i").key != Principal("s", "d", "i").key


def test_metadata_document_and_its_path():
    assert AUTH.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    assert AUTH.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    # offline_access is a refresh grant, never listed or challenged (2026-07-28).
    assert AUTH.metadata(["files:read"]) == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://as.example.com"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp", "files:read"],
    }


@pytest.mark.parametrize(
    "header, status, start",
    [
        (
            None,
            401,
            'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp"',
        ),
        ("Basic dXNlcjpwdw==", 401, "Bearer resource_metadata="),
        ("Bearer", 400, 'Bearer error="invalid_request"'),
        ("Bearer a, Bearer b", 400, 'Bearer error="invalid_request"'),
        ("Bearer zzz", 401, 'Bearer error="invalid_token", error_description="unknown token"'),
        ("Bearer n", 403, 'Bearer error="insufficient_scope"'),
    ],
)
def test_challenges(header, status, start):
    with pytest.raises(Challenge) as info:
        AUTH.authenticate(header)
    assert info.value.status == status and info.value.header.startswith(start), info.value.header


def test_a_valid_token_gives_its_principal():
    assert AUTH.authenticate("bearer a").subject == "alice"


def test_jwt_verifier_refuses_symmetric_and_none_algorithms():
    for alg in ("HS256", "none"):
        with pytest.raises(ValueError, match="JWT algorithms must be among"):
            JwtVerifier(jwks_url="https://as.example.com/jwks", issuer="i", audience="a", algorithms=[alg])


@pytest.mark.parametrize(
    "env, error",
    [
        ({"ZEMCP_AUTH": "oauth"}, "must be off, jwt or introspection"),
        ({"ZEMCP_AUTH": "jwt", "ZEMCP_AUTH_ISSUER": "https://as"}, "needs auth_jwks_url"),
        (
            {
                "ZEMCP_AUTH": "introspection",
                "ZEMCP_AUTH_ISSUER": "https://as",
                "ZEMCP_AUTH_INTROSPECTION_URL": "https://as/i",
            },
            "needs auth_client_id",
        ),
        ({"ZEMCP_AUTH_LEEWAY": "-1"}, r"auth_leeway \(ZEMCP_AUTH_LEEWAY\) must be"),
    ],
)
def test_auth_settings_are_checked(env, error):
    with pytest.raises(ValueError, match=error):
        Settings.from_env(env)


def test_auth_settings_parse_scopes_and_default_the_resource():
    s = Settings.from_env(
        {
            "ZEMCP_AUTH": "jwt",
            "ZEMCP_AUTH_ISSUER": "https://as",
            "ZEMCP_AUTH_JWKS_URL": "https://as/k",
            "ZEMCP_AUTH_SCOPES": "mcp, files:read",
            "ZEMCP_BIND": "127.0.0.1:9000",
        }
    )
    assert s.auth_scopes == ("mcp", "files:read") and s.auth_resource_url == "http://127.0.0.1:9000/mcp"
    assert zemcp.Server("x", settings=s).auth.resource == "http://127.0.0.1:9000/mcp"


def test_a_non_loopback_bind_without_authorization_warns_at_start(caplog):
    with caplog.at_level(logging.WARNING, "zemcp.transport"):
        zemcp.McpApp(zemcp.Server("x", settings=Settings(bind="0.0.0.0:8000")))
    assert "AUTHORIZATION IS OFF" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "zemcp.transport"):
        zemcp.McpApp(zemcp.Server("x", settings=Settings(bind="127.0.0.1:8000")))
        zemcp.McpApp(zemcp.Server("x", settings=Settings(bind="0.0.0.0:8000"), auth=AUTH))
        # A framework's authentication requires a user on every request that reaches it.
        zemcp.McpApp(zemcp.Server("x", settings=Settings(bind="0.0.0.0:8000")), guarded=True)
    assert "AUTHORIZATION IS OFF" not in caplog.text


def test_registration_scopes_must_be_scope_names():
    server = zemcp.Server("x", settings=Settings())
    with pytest.raises(ValueError, match="scopes must be a list of scope names"):
        server.tool(scopes="files:read")
    with pytest.raises(ValueError, match="scopes must be a list of scope names"):
        server.tool(scopes=["two words"])


def test_an_introspected_client_credentials_token_names_the_client_as_subject(monkeypatch):
    from zemcp.auth import IntrospectionVerifier

    verifier = IntrospectionVerifier(
        url="https://as.example.com/i",
        client_id="rs",
        client_secret="s",
        audience="https://mcp.example.com/mcp",
        cache_seconds=0,
    )
    monkeypatch.setattr(
        verifier,
        "_introspect",
        lambda token: {
            "active": True,
            "sub": None,
            "client_id": "batch-job",
            "aud": "https://mcp.example.com/mcp",
            "scope": "mcp",
        },
    )
    principal = verifier.verify("t")
    assert principal.subject == "batch-job" and principal.client_id == "batch-job"
