"""Icons and ``_meta`` on every definition, the server's implementation info, and ``_meta`` on
results, through the WSGI app in both eras (MCP 2025-11-25 ``Icon``, ``Implementation`` and
basic/index "_meta"; 2026-07-28 ``server/discover`` and ``io.modelcontextprotocol/serverInfo``).
"""

import pytest

import zemcp
from tests.apps.decorated import DATA_ICON, PNG_ICON, SERVER_ICON, TOOL_META, build_server
from tests.support.clients import inprocess_modern, inprocess_session


@pytest.fixture
def app():
    return zemcp.McpApp(build_server())


def lists(rpc) -> dict[str, dict]:
    """The decorated item of each list, by list."""
    tools = {tool["name"]: tool for tool in rpc("tools/list")["tools"]}
    return {
        "tool": tools["weather"],
        "plain": tools["plain"],
        "resource": rpc("resources/list")["resources"][0],
        "template": rpc("resources/templates/list")["resourceTemplates"][0],
        "prompt": rpc("prompts/list")["prompts"][0],
    }


def expected_items() -> dict[str, tuple[list, dict]]:
    return {
        "tool": ([PNG_ICON.definition()], TOOL_META),
        "resource": ([DATA_ICON], {"com.example/owner": "met"}),
        "template": ([PNG_ICON.definition()], {"com.example/kind": "city"}),
        "prompt": ([DATA_ICON], {"com.example/tone": "brief"}),
    }


def test_every_list_carries_icons_and_meta_in_the_handshake_era(app):
    peer = inprocess_session(app, protocol_version="2025-11-25")
    items = lists(peer.rpc)
    for kind, (icons, meta) in expected_items().items():
        assert (items[kind]["icons"], items[kind]["_meta"]) == (icons, meta), (kind, items[kind])
    assert PNG_ICON.definition() == {
        "src": "https://example.com/tool.png",
        "mimeType": "image/png",
        "sizes": ["48x48"],
        "theme": "light",
    }
    assert "icons" not in items["plain"] and "_meta" not in items["plain"]


def test_every_list_carries_icons_and_meta_in_the_2026_era(app):
    peer = inprocess_modern(app)
    items = lists(peer.rpc)
    for kind, (icons, meta) in expected_items().items():
        assert (items[kind]["icons"], items[kind]["_meta"]) == (icons, meta), (kind, items[kind])


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_versions_before_icons_get_meta_without_icons(app, version):
    peer = inprocess_session(app, protocol_version=version)
    items = lists(peer.rpc)
    for kind, (_, meta) in expected_items().items():
        assert "icons" not in items[kind], (version, kind, items[kind])
        assert items[kind]["_meta"] == meta, (version, kind)
    info = peer.wire.json(peer.init_response)["result"]["serverInfo"]
    expected = {"name": "decorated", "version": "2.0"}
    if version == "2025-06-18":
        expected["title"] = "Decorated server"
    assert info == expected


def test_initialize_carries_the_whole_implementation_at_2025_11_25(app):
    peer = inprocess_session(app, protocol_version="2025-11-25")
    assert peer.wire.json(peer.init_response)["result"]["serverInfo"] == {
        "name": "decorated",
        "version": "2.0",
        "title": "Decorated server",
        "description": "A server whose definitions carry icons and _meta.",
        "websiteUrl": "https://example.com/decorated",
        "icons": [SERVER_ICON],
    }


def test_discover_and_every_2026_result_carry_the_implementation(app):
    peer = inprocess_modern(app)
    whole = {
        "name": "decorated",
        "version": "2.0",
        "title": "Decorated server",
        "description": "A server whose definitions carry icons and _meta.",
        "websiteUrl": "https://example.com/decorated",
        "icons": [SERVER_ICON],
    }
    assert peer.initialize()["_meta"]["io.modelcontextprotocol/serverInfo"] == whole
    assert peer.rpc("tools/list")["_meta"]["io.modelcontextprotocol/serverInfo"] == whole


def test_a_tool_result_keeps_its_meta_in_both_eras(app):
    handshake = inprocess_session(app, protocol_version="2025-11-25")
    result = handshake.rpc("tools/call", {"name": "with_result_meta", "arguments": {"city": "Oslo"}})
    assert result["_meta"] == {"com.example/trace": "t-1"} and result["content"][0]["text"] == "Oslo"
    modern = inprocess_modern(app)
    result = modern.rpc("tools/call", {"name": "with_result_meta", "arguments": {"city": "Oslo"}})
    # The author's key beside the server's own.
    assert result["_meta"]["com.example/trace"] == "t-1"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "decorated"


def test_a_tool_result_with_a_reserved_meta_key_is_a_tool_error(app):
    peer = inprocess_session(app, protocol_version="2025-11-25")
    result = peer.rpc("tools/call", {"name": "with_reserved_result_meta", "arguments": {}})
    assert result["isError"] is True
    assert "_meta" not in result
    text = result["content"][0]["text"]
    assert "the CallToolResult: _meta key 'io.modelcontextprotocol/serverInfo'" in text
    assert "reserved for MCP itself" in text


def test_a_prompt_and_a_resource_read_keep_their_meta(app):
    for rpc in (inprocess_session(app, protocol_version="2025-11-25").rpc, inprocess_modern(app).rpc):
        prompt = rpc("prompts/get", {"name": "summary", "arguments": {"topic": "tides"}})
        assert prompt["_meta"]["com.example/version"] == 3
        assert prompt["description"] == "Summarise a topic."
        assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "Summarise tides"}}]
        contents = rpc("resources/read", {"uri": "test://forecast"})["contents"]
        assert contents == [
            {
                "uri": "test://forecast",
                "mimeType": "text/plain",
                "text": "rain",
                "_meta": {"com.example/source": "radar"},
            }
        ]
