"""Sessions over real HTTP: the Mcp-Session-Id header, MCP-Protocol-Version, DELETE, cap, expiry."""

import time

import pytest

REFUSED_BY_AUTO_CLIENTS = (-32020, -32021, -32022)


def test_request_without_session_header_is_400_echoing_id(client):
    """A non-initialize request without Mcp-Session-Id gets 400 with a JSON-RPC error echoing its id."""
    response = client.post({"jsonrpc": "2.0", "id": 42, "method": "tools/list"}, session=False)
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["id"] == 42
    assert isinstance(body["error"]["code"], int) and body["error"]["message"]


def test_server_discover_probe_gets_400_error_that_means_fall_back(server):
    """The 2026-07-28 server/discover probe gets 400 with id 1 and a code other than -32020/-32021/-32022."""
    client = server.client()
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}},
        headers={"MCP-Protocol-Version": "2026-07-28"},
        session=False,
    )
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    assert isinstance(body["error"]["code"], int)
    assert body["error"]["code"] not in REFUSED_BY_AUTO_CLIENTS, body
    assert "Mcp-Session-Id" not in response.headers


@pytest.mark.parametrize("session_id", ["no-such-session-0123456789abcdef", "x"])
def test_unknown_session_is_404(client, session_id):
    """A request naming an unknown session gets 404."""
    response = client.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers={"Mcp-Session-Id": session_id})
    assert response.status_code == 404, response.text


def test_protocol_version_header_absent_is_accepted(client):
    """A request without MCP-Protocol-Version is accepted."""
    response = client.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, version=False)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_protocol_version_header_supported_is_accepted(client, version):
    """A request whose MCP-Protocol-Version is a supported version is accepted."""
    response = client.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers={"MCP-Protocol-Version": version})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "garbage"])
def test_protocol_version_header_unsupported_is_400(client, version):
    """A request whose MCP-Protocol-Version is not a supported version gets 400."""
    response = client.post({"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers={"MCP-Protocol-Version": version})
    assert response.status_code == 400, response.text
    body = response.json()
    assert "error" in body and body["id"] == 6


def test_delete_ends_session_then_404(server):
    """DELETE answers 204 and later requests (and DELETEs) with that id get 404."""
    client = server.session()
    other = server.session()
    sessions_before = other.status()["sessions"]
    response = client.delete()
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert client.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}).status_code == 404
    assert client.post(client.call_message({"command": "session show"})).status_code == 404
    assert client.delete().status_code == 404
    assert other.status()["sessions"] == sessions_before - 1


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28"])
def test_delete_with_unsupported_protocol_version_is_400(server, version):
    """DELETE whose MCP-Protocol-Version is not supported gets 400 and leaves the session alive."""
    client = server.session()
    response = client.http.delete(
        client.url, timeout=(5, 10), headers={"Mcp-Session-Id": client.session_id, "MCP-Protocol-Version": version}
    )
    assert response.status_code == 400, (response.status_code, response.text)
    assert client.request("ping").status_code == 200, "a refused DELETE must not end the session"
    accepted = client.http.delete(
        client.url,
        timeout=(5, 10),
        headers={"Mcp-Session-Id": client.session_id, "MCP-Protocol-Version": client.protocol_version},
    )
    assert accepted.status_code == 204


def test_session_cap_is_429_with_retry_after(start_server):
    """Beyond ZEMCP_MAX_SESSIONS, initialize gets 429 with Retry-After; a DELETE frees a slot."""
    server = start_server(max_sessions=2)
    first = server.session()
    server.session()
    third = server.client()
    response = third.initialize()
    assert response.status_code == 429, response.text
    assert "Mcp-Session-Id" not in response.headers
    retry_after = response.headers.get("Retry-After")
    assert retry_after is not None and retry_after.isdigit() and int(retry_after) > 0, response.headers
    body = response.json()
    assert "error" in body and body["id"] == 1
    status = first.status()
    assert status["sessions"] == 2 and status["session_cap"] == 2
    assert first.delete().status_code == 204
    assert third.initialize().status_code == 200


def test_idle_session_expires_but_pending_elicitation_keeps_session_alive(start_server):
    """With ZEMCP_SESSION_TTL=1 an idle session gets 404 after ~3 s; one with a pending elicitation does not."""
    server = start_server(session_ttl=1, keepalive_interval=0.5, elicitation_timeout=30)
    idle = server.session(name="idle-client")
    waiting = server.session(name="waiting-client")
    call, _, stream, elicitation = waiting.start_elicitation()
    # Neither session sends a request for 3 s (three TTLs); the waiting stream only gets keep-alives.
    start = time.monotonic()
    while time.monotonic() - start < 3.0:
        item = stream.next_item()
        assert item is not None and item[0] == "comment", item
    assert idle.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 404
    answer = waiting.accept(elicitation["id"], {"command": "session show"})
    assert answer.status_code == 202, answer.text
    final = stream.next_message()
    assert final["id"] == call["id"], final
    assert final["result"]["isError"] is False, final
    assert "waiting-client" in final["result"]["content"][0]["text"]
    assert stream.next_message() is None
    assert waiting.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}).status_code == 200
