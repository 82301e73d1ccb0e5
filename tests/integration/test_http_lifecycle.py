"""Lifecycle over real HTTP: initialize, version negotiation, ping, notifications/initialized."""

import string

import pytest

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def test_initialize_creates_session_with_strong_visible_ascii_id(server):
    """initialize answers 200 application/json with an Mcp-Session-Id of visible ASCII and >= 128 bits."""
    ids = set()
    for _ in range(3):
        client = server.client()
        response = client.initialize()
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        body = response.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == 1
        result = body["result"]
        assert result["serverInfo"]["name"] and result["serverInfo"]["version"]
        assert "tools" in result["capabilities"]
        session_id = response.headers.get("Mcp-Session-Id")
        assert session_id, response.headers
        assert all(0x21 <= ord(ch) <= 0x7E for ch in session_id), repr(session_id)
        # 128 bits need 32 hex digits, or 22 characters of a 64-symbol alphabet.
        minimum = 32 if set(session_id) <= set(string.hexdigits) else 22
        assert len(session_id) >= minimum, f"{session_id!r} is too short for 128 random bits"
        ids.add(session_id)
    assert len(ids) == 3, "every initialize must create a distinct session id"


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_initialize_echoes_supported_version_and_stores_it(server, version):
    """A supported requested protocolVersion is echoed and stored on the session."""
    client = server.client()
    response = client.initialize(protocol_version=version)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == version
    assert f"protocol version: {version}" in client.command_text("session show")


def test_initialize_unknown_version_gets_latest(server):
    """An unknown requested protocolVersion gets the server's latest, 2025-11-25."""
    client = server.client()
    response = client.initialize(protocol_version="1999-01-01")
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    assert "protocol version: 2025-11-25" in client.command_text("session show")


def test_initialize_with_live_session_id_is_rejected_without_new_session(server):
    """initialize carrying a live Mcp-Session-Id gets 400 and creates no session."""
    client = server.session()
    before = client.status()["sessions"]
    listed_before = client.command_text("session list").splitlines()[0]
    response = client.initialize(headers={"Mcp-Session-Id": client.session_id}, initialized=False)
    assert response.status_code == 400, response.text
    assert "Mcp-Session-Id" not in response.headers
    body = response.json()
    assert body["error"]["code"] < 0 and body["id"] == client._next_id
    # The client keeps its old session id (initialize failed), and the count did not move.
    after = client.status()["sessions"]
    assert after == before, f"sessions went from {before} to {after}"
    assert client.command_text("session list").splitlines()[0] == listed_before


def test_ping_answers_empty_object(client):
    """ping answers a JSON-RPC result {}."""
    response = client.request("ping")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body == {"jsonrpc": "2.0", "id": client._next_id, "result": {}}


def test_initialized_notification_gets_202_with_empty_body(server):
    """notifications/initialized gets 202 with an empty body."""
    client = server.client()
    assert client.initialize(initialized=False).status_code == 200
    response = client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
    assert response.content == b""


def test_tools_list_describes_ze_execute(client):
    """tools/list answers application/json with ze_execute's name, description and inputSchema."""
    tools = client.rpc("tools/list")["tools"]
    by_name = {tool["name"]: tool for tool in tools}
    assert "ze_execute" in by_name, tools
    tool = by_name["ze_execute"]
    assert tool["description"]
    assert tool["inputSchema"]["type"] == "object"
    assert tool["inputSchema"]["properties"]["command"]["type"] == "string"


def test_elicitation_capability_must_be_an_object(server):
    """Only capabilities.elicitation given as a JSON object counts as the elicitation capability."""
    declared = server.client()
    assert declared.initialize(capabilities={"elicitation": {}}).status_code == 200
    assert "elicitation: yes" in declared.command_text("session show")
    not_object = server.client()
    assert not_object.initialize(capabilities={"elicitation": True}).status_code == 200
    assert "elicitation: no" in not_object.command_text("session show")
    result = not_object.execute("")
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Error: missing required argument: command"
