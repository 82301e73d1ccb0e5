"""MCP Apps on zemcp in this process (MCP Apps 2026-01-26): the extension in the capabilities of
both eras, ``ctx.client_supports_apps`` both ways in both eras, an app resource's HTML from a
string, a file and a render callable, app-only tools listed and callable, and the start-up
checks with their messages. The same declarations before a real host are in
tests/integration/test_http_apps_host.py.
"""

from __future__ import annotations

import io
import re

import pytest

import zemcp
from tests.support.apphost import APP_MIME_TYPE, APPS_CAPABILITIES, EXTENSION_ID
from tests.support.clients import HandshakeClient, inprocess_modern, inprocess_session
from tests.support.wires import InProcessWire
from zemcp.cli.stdio import StdioTransport

CARD = "ui://weather/card.html"
HTML = "<!doctype html><title>card</title>"
#: A client that declared the extension, but not the app MIME type.
OTHER_MIME = {"extensions": {EXTENSION_ID: {"mimeTypes": ["text/uri-list"]}}}


def weather_server() -> zemcp.Server:
    server = zemcp.Server("weather")

    @server.tool(ui_resource=CARD)
    def get_weather(city: str, ctx: zemcp.Context) -> str:
        """The weather, with a card."""
        return "card" if ctx.client_supports_apps else f"The weather in {city} is sunny."

    @server.tool(ui_resource=CARD, visibility=["app"], meta={"com.example/cost": 1})
    def refresh(city: str) -> str:
        """For the app only."""
        return f"refreshed {city}"

    server.app_resource(CARD, html=HTML)
    return server


def call_text(peer, tool: str = "get_weather") -> str:
    return peer.rpc("tools/call", {"name": tool, "arguments": {"city": "Oslo"}})["content"][0]["text"]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05"])
def test_initialize_advertises_the_extension_in_every_handshake_version(version):
    peer = inprocess_session(zemcp.McpApp(weather_server()), protocol_version=version)
    capabilities = peer.wire.json(peer.init_response)["result"]["capabilities"]
    assert capabilities["extensions"] == {EXTENSION_ID: {}}


def test_server_discover_advertises_the_extension_beside_tasks():
    server = weather_server()

    @server.tool(task="optional")
    def slow() -> str:
        """A task."""
        return "done"

    discovered = inprocess_modern(zemcp.McpApp(server)).initialize()
    assert discovered["capabilities"]["extensions"] == {EXTENSION_ID: {}, "io.modelcontextprotocol/tasks": {}}


def test_a_server_without_apps_advertises_no_extension():
    server = zemcp.Server("plain")
    server.resource("ui://plain/page.html")(lambda: HTML)
    assert "extensions" not in server.capabilities("2025-11-25")
    assert "extensions" not in server.capabilities("2026-07-28")


@pytest.mark.parametrize(("capabilities", "renders"), [(APPS_CAPABILITIES, True), ({}, False), (OTHER_MIME, False)])
def test_the_handler_knows_whether_the_handshake_client_renders_apps(capabilities, renders):
    peer = inprocess_session(zemcp.McpApp(weather_server()), capabilities=capabilities)
    assert call_text(peer) == ("card" if renders else "The weather in Oslo is sunny.")


@pytest.mark.parametrize(("capabilities", "renders"), [(APPS_CAPABILITIES, True), ({}, False), (OTHER_MIME, False)])
def test_the_handler_knows_whether_the_2026_request_renders_apps(capabilities, renders):
    peer = inprocess_modern(zemcp.McpApp(weather_server()), capabilities=capabilities)
    assert call_text(peer) == ("card" if renders else "The weather in Oslo is sunny.")


def test_each_2026_request_says_for_itself_whether_its_client_renders_apps():
    peer = inprocess_modern(zemcp.McpApp(weather_server()), capabilities=APPS_CAPABILITIES)
    assert call_text(peer) == "card"
    message = peer.message("tools/call", {"name": "get_weather", "arguments": {"city": "Oslo"}}, capabilities={})
    assert peer.result(peer.post(message))["content"][0]["text"] == "The weather in Oslo is sunny."


def test_an_app_only_tool_is_listed_and_callable_with_its_meta():
    peer = inprocess_session(zemcp.McpApp(weather_server()), capabilities=APPS_CAPABILITIES)
    tools = {tool["name"]: tool for tool in peer.rpc("tools/list")["tools"]}
    assert tools["get_weather"]["_meta"] == {"ui": {"resourceUri": CARD}}
    assert tools["refresh"]["_meta"] == {"com.example/cost": 1, "ui": {"resourceUri": CARD, "visibility": ["app"]}}
    assert call_text(peer, "refresh") == "refreshed Oslo"


def test_the_resource_is_listed_and_read_with_the_app_mime_type_and_no_meta_when_none_was_given():
    peer = inprocess_modern(zemcp.McpApp(weather_server()))
    (listed,) = peer.rpc("resources/list")["resources"]
    assert listed == {"uri": CARD, "name": CARD, "mimeType": APP_MIME_TYPE}
    (content,) = peer.rpc("resources/read", {"uri": CARD})["contents"]
    assert content == {"uri": CARD, "mimeType": APP_MIME_TYPE, "text": HTML}


def test_the_ui_meta_is_on_the_list_entry_and_on_the_read_content():
    server = zemcp.Server("apps")
    server.app_resource(
        CARD,
        html=HTML,
        csp={"connectDomains": ["https://api.example.com"], "frameDomains": []},
        permissions={"camera": {}, "geolocation": {}},
        domain="abc.example-host.com",
        prefers_border=False,
        meta={"com.example/owner": "met"},
    )
    ui = {
        "csp": {"connectDomains": ["https://api.example.com"], "frameDomains": []},
        "permissions": {"camera": {}, "geolocation": {}},
        "domain": "abc.example-host.com",
        "prefersBorder": False,
    }
    peer = inprocess_session(zemcp.McpApp(server))
    assert peer.rpc("resources/list")["resources"][0]["_meta"] == {"com.example/owner": "met", "ui": ui}
    assert peer.rpc("resources/read", {"uri": CARD})["contents"][0]["_meta"] == {"com.example/owner": "met", "ui": ui}


def test_app_csp_gives_the_specifications_camel_case_with_only_the_fields_given():
    csp = zemcp.AppCsp(connect_domains=["https://a.example"], base_uri_domains=("https://b.example",))
    assert csp.to_meta() == {"connectDomains": ["https://a.example"], "baseUriDomains": ["https://b.example"]}


def test_a_file_is_read_at_each_read_and_render_is_called_with_or_without_the_context(tmp_path):
    page = tmp_path / "card.html"
    page.write_text("<p>first", encoding="utf-8")
    server = zemcp.Server("apps")
    server.app_resource("ui://apps/file.html", file=page)
    server.app_resource("ui://apps/plain.html", render=lambda: "<p>rendered")
    server.app_resource("ui://apps/ctx.html", render=lambda ctx: f"<p>for {ctx.client.client_info['name']}")
    peer = inprocess_modern(zemcp.McpApp(server), name="host-x")

    def text(uri: str) -> str:
        return peer.rpc("resources/read", {"uri": uri})["contents"][0]["text"]

    assert text("ui://apps/file.html") == "<p>first"
    page.write_text("<p>edited", encoding="utf-8")
    assert text("ui://apps/file.html") == "<p>edited"
    assert text("ui://apps/plain.html") == "<p>rendered"
    assert text("ui://apps/ctx.html") == "<p>for host-x"


# -- the checks ---------------------------------------------------------------------------


def show(city: str = "") -> str:
    """The tool the checks register."""
    return city


def test_a_tool_ui_resource_must_be_ui_scheme():
    server = zemcp.Server("apps")
    with pytest.raises(ValueError, match=r"tool 'show': MCP Apps URIs must use the ui:// scheme, got 'https://x/y'"):
        server.tool(ui_resource="https://x/y")(show)
    with pytest.raises(ValueError, match="MCP Apps URIs must use the ui:// scheme, got 'file:///card.html'"):
        server.app_resource("file:///card.html", html=HTML)


def test_meta_with_ui_beside_the_declaration_is_refused():
    server = zemcp.Server("apps")
    with pytest.raises(ValueError, match=r"tool 'show': meta has a 'ui' key, but _meta.ui is made from ui_resource="):
        server.tool(ui_resource=CARD, meta={"ui": {"resourceUri": "ui://other"}})(show)
    with pytest.raises(ValueError, match=r"app resource 'ui://weather/card.html': meta has a 'ui' key"):
        server.app_resource(CARD, html=HTML, meta={"ui": {"prefersBorder": True}})


def test_visibility_must_be_model_and_app_with_a_ui_resource():
    server = zemcp.Server("apps")
    with pytest.raises(ValueError, match=r"visibility must be a list of 'model' and 'app'"):
        server.tool(ui_resource=CARD, visibility=["user"])(show)
    with pytest.raises(ValueError, match=r"visibility applies to a tool with a ui_resource="):
        server.tool(visibility=["app"])(show)


def test_exactly_one_html_source_and_known_csp_and_permissions():
    server = zemcp.Server("apps")
    with pytest.raises(ValueError, match=r"give exactly one of html=.*got html, render"):
        server.app_resource(CARD, html=HTML, render=lambda: HTML)
    with pytest.raises(ValueError, match=r"give exactly one of html=.*got none"):
        server.app_resource(CARD)
    with pytest.raises(ValueError, match=r"file '/nonexistent/card.html' is not a file"):
        server.app_resource(CARD, file="/nonexistent/card.html")
    with pytest.raises(ValueError, match=r"csp key 'connect_domains' is not one of connectDomains"):
        server.app_resource(CARD, html=HTML, csp={"connect_domains": ["https://a.example"]})
    with pytest.raises(ValueError, match=r"permission 'clipboard' is not one of camera, microphone"):
        server.app_resource(CARD, html=HTML, permissions=["clipboard"])


def test_serving_a_tool_whose_resource_is_missing_is_refused_by_both_transports():
    server = zemcp.Server("apps")
    server.tool(ui_resource=CARD)(show)
    message = (
        "tool 'show' shows ui_resource 'ui://weather/card.html', but no resource has that URI; "
        "register it with server.app_resource('ui://weather/card.html', html=... or file=... or render=...)"
    )
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        zemcp.McpApp(server)
    with pytest.raises(ValueError, match="no resource has that URI"):
        StdioTransport(server, io.BytesIO(), io.BytesIO())
    # Registered after the tool, before serving: fine.
    server.app_resource(CARD, html=HTML)
    zemcp.McpApp(server)


def test_a_tool_registered_after_its_endpoint_was_made_is_checked_at_each_request_until_it_holds(caplog):
    server = zemcp.Server("apps")
    app = zemcp.McpApp(server)
    server.tool(ui_resource=CARD)(show)
    client = HandshakeClient(InProcessWire(app))
    for _ in range(2):
        refused = client.initialize()
        assert refused.status_code == 500
        error = refused.get_json()["error"]
        assert error["code"] == -32603 and "no resource has that URI" in error["message"], error
    assert "not serving: the server's MCP Apps declarations do not hold together" in caplog.text
    server.app_resource(CARD, html=HTML)
    assert client.initialize().status_code == 200


def test_a_plain_resource_bound_by_a_tool_needs_the_app_mime_type():
    server = zemcp.Server("apps")
    server.tool(ui_resource=CARD)(show)
    server.resource(CARD)(lambda: HTML)
    with pytest.raises(
        ValueError,
        match=r"resource 'ui://weather/card.html', the ui_resource of tool 'show', is served as 'text/plain', "
        r"but hosts render only 'text/html;profile=mcp-app'; register it with server.app_resource",
    ):
        zemcp.McpApp(server)
    fixed = zemcp.Server("apps")
    fixed.tool(ui_resource=CARD)(show)
    fixed.resource(CARD, mime_type=APP_MIME_TYPE)(lambda: HTML)
    zemcp.McpApp(fixed)


@pytest.mark.parametrize(
    ("csp", "message"),
    [
        (
            zemcp.AppCsp(connect_domains="https://api.example.com"),
            "csp connectDomains must be a list of origins such as ['https://cdn.example.com'], got "
            "'https://api.example.com'",
        ),
        ({"connectDomains": ["*"]}, "csp connectDomains entry '*' is not an origin"),
        ({"resourceDomains": ["https://cdn.example.com; script-src *"]}, "is not an origin"),
        ({"frameDomains": ["ftp://files.example.com"]}, "is not an origin: give scheme (https, http, wss, ws)"),
    ],
)
def test_csp_takes_lists_of_origins_only(csp, message):
    server = zemcp.Server("apps")
    with pytest.raises(ValueError, match=re.escape(message)):
        server.app_resource(CARD, html=HTML, csp=csp)
    server.app_resource(
        CARD, html=HTML, csp=zemcp.AppCsp(connect_domains=["https://api.example.com", "wss://*.example.com:8443"])
    )


def test_a_permission_maps_to_an_object():
    server = zemcp.Server("apps")
    with pytest.raises(
        ValueError, match=re.escape("permission 'camera' must map to an object ({} as the specification")
    ):
        server.app_resource(CARD, html=HTML, permissions={"camera": True})


def test_a_hand_written_ui_meta_is_refused_on_any_tool():
    server = zemcp.Server("apps")
    with pytest.raises(
        ValueError,
        match=re.escape("tool 'show': meta has a 'ui' key; declare the tool's app with ui_resource= (and visibility=)"),
    ):
        server.tool(meta={"ui": {"resourceUri": CARD}})(show)


def test_a_duplicated_visibility_is_named():
    server = zemcp.Server("apps")
    with pytest.raises(
        ValueError, match=re.escape("visibility must be a list of 'model' and 'app' (each at most once)")
    ):
        server.tool(ui_resource=CARD, visibility=["app", "app"])(show)


def test_a_relative_file_is_taken_from_the_working_directory_at_registration(tmp_path, monkeypatch):
    (tmp_path / "card.html").write_text("<p>card</p>")
    monkeypatch.chdir(tmp_path)
    server = zemcp.Server("apps")
    server.app_resource(CARD, file="card.html")
    monkeypatch.chdir("/")
    read = inprocess_session(zemcp.McpApp(server)).rpc("resources/read", {"uri": CARD})
    assert read["contents"][0]["text"] == "<p>card</p>"


def test_an_app_page_is_not_a_template():
    with pytest.raises(ValueError, match=re.escape("app resource 'ui://x/{id}': an app's page is one document")):
        zemcp.Server("apps").app_resource("ui://x/{id}", html=HTML)
