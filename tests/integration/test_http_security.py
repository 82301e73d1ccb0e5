"""HTTP methods, Origin and Host checks (DNS rebinding) over real HTTP."""

import pytest
import requests

TIMEOUT = (5, 10)


@pytest.mark.parametrize("method", ["PUT", "PATCH", "HEAD"])
def test_other_methods_are_405_with_allow(client, method):
    """Methods other than GET, POST and DELETE get 405 with an Allow header naming POST."""
    response = requests.request(
        method,
        client.url,
        timeout=TIMEOUT,
        headers={
            "Accept": "text/event-stream",
            "Mcp-Session-Id": client.session_id,
            "MCP-Protocol-Version": client.protocol_version,
        },
    )
    assert response.status_code == 405, response.text
    allow = [m.strip().upper() for m in response.headers.get("Allow", "").split(",")]
    assert "POST" in allow, response.headers
    assert method not in allow, response.headers


def test_options_without_a_preflight_names_the_methods(client):
    """OPTIONS that is no CORS preflight (no Origin) gets 204 and the Allow header."""
    response = requests.options(client.url, timeout=TIMEOUT)
    assert response.status_code == 204, response.text
    assert [m.strip() for m in response.headers["Allow"].split(",")] == ["GET", "POST", "DELETE", "OPTIONS"]


@pytest.mark.parametrize("origin", ["http://evil.example.com", "https://attacker.test:8443", "null"])
def test_bad_origin_is_403_before_session_lookup(client, origin):
    """A disallowed Origin gets 403, even with a bogus session id (not 404)."""
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": origin, "Mcp-Session-Id": "bogus-session-id"}
    )
    assert response.status_code == 403, response.text
    live = client.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={"Origin": origin})
    assert live.status_code == 403, live.text


def test_bad_origin_on_initialize_creates_no_session(server):
    """initialize from a disallowed Origin gets 403 and no session."""
    observer = server.session()
    before = observer.status()["sessions"]
    client = server.client()
    response = client.initialize(headers={"Origin": "http://evil.example.com"})
    assert response.status_code == 403, response.text
    assert "Mcp-Session-Id" not in response.headers
    assert observer.status()["sessions"] == before


def test_bad_origin_on_delete_is_403_and_session_survives(client):
    """DELETE from a disallowed Origin gets 403 and does not end the session."""
    response = requests.delete(
        client.url, timeout=TIMEOUT, headers={"Mcp-Session-Id": client.session_id, "Origin": "http://evil.example.com"}
    )
    assert response.status_code == 403, response.text
    assert client.request("ping").status_code == 200


@pytest.mark.parametrize(
    "origin",
    ["http://localhost", "http://localhost:3000", "http://127.0.0.1:8080", "https://127.0.0.1", "http://[::1]:5173"],
)
def test_loopback_origin_is_allowed(client, origin):
    """A loopback Origin is allowed by default."""
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": origin})
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


def test_missing_origin_is_allowed(client):
    """A request without Origin (a non-browser client) is allowed."""
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": None})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:{port}", "10.1.2.3:{port}"])
def test_non_loopback_host_is_403(client, server, host):
    """On a loopback bind, a request whose Host is not a loopback name gets 403 saying how to serve it behind a proxy."""
    port = server.port
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Host": host.format(port=port)})
    assert response.status_code == 403, response.text
    message = response.json()["error"]["message"]
    assert message.startswith(f"Forbidden: Host {host.format(port=port)!r} is not a loopback name"), message
    # The two ways out: a proxy that sends a loopback Host, or a bind only the proxy reaches.
    assert "proxy_set_header Host localhost;" in message and "http-request set-header Host localhost" in message
    assert "ZEMCP_BIND" in message, message
    init = server.client().initialize(headers={"Host": host.format(port=port)})
    assert init.status_code == 403, init.text


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "localhost"])
def test_loopback_host_is_allowed(client, server, host):
    """A loopback Host header is accepted."""
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Host": host.format(port=server.port)}
    )
    assert response.status_code == 200, response.text


def test_allowed_origins_setting_extends_the_allowlist(start_server):
    """ZEMCP_ALLOWED_ORIGINS adds exact origins; loopback stays allowed and other origins get 403."""
    server = start_server(allowed_origins="https://app.example.com, http://tools.example.org:8080")
    client = server.client()
    assert client.initialize(headers={"Origin": "https://app.example.com"}).status_code == 200
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for origin in ("https://app.example.com", "http://tools.example.org:8080", "http://localhost:6274"):
        response = client.post(ping, headers={"Origin": origin})
        assert response.status_code == 200, (origin, response.text)
    for origin in (
        "http://app.example.com",
        "https://app.example.com:444",
        "http://tools.example.org",
        "https://evil.example.com",
    ):
        response = client.post(ping, headers={"Origin": origin})
        assert response.status_code == 403, (origin, response.text)
