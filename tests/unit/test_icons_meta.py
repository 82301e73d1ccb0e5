"""The registration checks of ``icons=`` and ``meta=`` (MCP 2025-11-25 ``Icon`` and basic/index
"_meta"), and of the server's implementation info: each rule with its error text."""

import re

import pytest

import zemcp
from zemcp.protocol.metadata import key_problem


def register(kind: str, **options):
    """Register one handler of ``kind`` with ``options`` on a fresh server."""
    server = zemcp.Server("checks")
    if kind == "tool":
        server.tool("lookup", **options)(lambda: "x")
    elif kind == "resource":
        server.resource("test://static", **options)(lambda: "x")
    elif kind == "template":
        server.resource("test://items/{id}", **options)(lambda id: id)
    else:
        server.prompt("brief", **options)(lambda: "x")
    return server


WHERE = {
    "tool": "tool 'lookup'",
    "resource": "resource 'test://static'",
    "template": "resource template 'test://items/{id}'",
    "prompt": "prompt 'brief'",
}


@pytest.mark.parametrize(
    "key",
    [
        "plain",
        "ui",
        "com.example/category",
        "com.example.mcp/tools",  # the second label is "example": not reserved
        "openai/outputTemplate",
        "com.example/",  # an empty name is allowed
        "a-1.b2/x_y.z-9",
    ],
)
def test_keys_the_rules_allow(key):
    assert key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("io.modelcontextprotocol/serverInfo", "the prefix 'io.modelcontextprotocol/' is reserved for MCP itself"),
        ("dev.mcp/x", "the prefix 'dev.mcp/' is reserved for MCP itself (its second label is 'mcp')"),
        ("com.mcp.tools/x", "the prefix 'com.mcp.tools/' is reserved for MCP itself"),
        ("org.ModelContextProtocol.api/x", "is reserved for MCP itself"),
        ("1com.example/x", "the prefix '1com.example/' must be dot-separated labels that start with a letter"),
        ("com.example-/x", "must be dot-separated labels"),
        ("com..example/x", "must be dot-separated labels"),
        ("a/b/c", "the prefix 'a/b/' must be dot-separated labels"),
        ("_private", "the name '_private' must start and end with a letter or a digit"),
        ("com.example/name-", "the name 'name-' must start and end"),
        ("com.example/na me", "hold only letters, digits, '-', '_' and '.'"),
        ("", "a key must be a non-empty string"),
    ],
)
def test_keys_the_rules_refuse(key, rule):
    assert rule in key_problem(key)


@pytest.mark.parametrize("kind", list(WHERE))
def test_a_reserved_meta_key_is_refused_naming_the_registration_the_key_and_the_rule(kind):
    with pytest.raises(ValueError) as caught:
        register(kind, meta={"io.modelcontextprotocol/related-task": {}})
    assert str(caught.value) == (
        f"{WHERE[kind]}: _meta key 'io.modelcontextprotocol/related-task': the prefix "
        "'io.modelcontextprotocol/' is reserved for MCP itself (its second label is 'modelcontextprotocol'); "
        "use a reverse-DNS prefix of your own, such as 'com.example/' (MCP basic/index, '_meta')"
    )


def test_meta_must_be_a_dict_of_json_values():
    with pytest.raises(ValueError, match=r"tool 'lookup': _meta must be a dict of keys to JSON values, got list"):
        register("tool", meta=["a"])
    with pytest.raises(ValueError, match=r"tool 'lookup': _meta key 'when': the value must be JSON"):
        register("tool", meta={"when": object()})


@pytest.mark.parametrize("kind", list(WHERE))
@pytest.mark.parametrize(
    "src",
    ["http://example.com/a.png", "file:///etc/icon.png", "javascript:alert(1)", "ftp://example.com/a.png", "a.png"],
)
def test_an_icon_source_other_than_https_or_data_is_refused(kind, src):
    with pytest.raises(ValueError) as caught:
        register(kind, icons=[{"src": src}])
    assert str(caught.value) == (
        f"{WHERE[kind]}: icon 1: src {src!r} must be an https: URL with a host or a data: URI "
        "(data:image/png;base64,...): clients reject icons from any other scheme (MCP basic/index, 'icons'), "
        "so serve the image over https or inline it"
    )


@pytest.mark.parametrize(
    ("icon", "message"),
    [
        (
            zemcp.Icon("https://example.com/a.png", theme="blue"),
            "tool 'lookup': icon 1: theme must be 'light' or 'dark' (or left out for either), got 'blue'",
        ),
        (
            {"src": "https://example.com/a.png", "sizes": ["48"]},
            "tool 'lookup': icon 1: sizes must be a list of 'WxH' (such as '48x48') or 'any', got ['48']",
        ),
        (
            {"src": "https://example.com/a.png", "mimeType": "png"},
            "tool 'lookup': icon 1: mimeType must be an image's MIME type such as 'image/png', got 'png'",
        ),
        (
            {"src": "https://example.com/a.png", "alt": "x"},
            "tool 'lookup': icon 1: unknown key(s) alt; an icon has src, mimeType, sizes and theme",
        ),
        ("https://example.com/a.png", "tool 'lookup': icon 1: must be a zemcp.Icon or a dict with 'src', got str"),
        ({"mimeType": "image/png"}, "tool 'lookup': icon 1: src must be an https: URL or a data: URI, got None"),
    ],
)
def test_malformed_icons_are_refused(icon, message):
    with pytest.raises(ValueError) as caught:
        register("tool", icons=[{"src": "data:image/png;base64,AA=="}, icon])
    assert str(caught.value) == message.replace("icon 1", "icon 2")


def test_icons_must_be_a_list():
    with pytest.raises(ValueError, match=r"tool 'lookup': icons must be a list of zemcp.Icon or of dicts"):
        register("tool", icons={"src": "https://example.com/a.png"})


def test_the_implementation_info_is_checked():
    with pytest.raises(ValueError, match=r"Server 'x': website_url must be an absolute URL such as"):
        zemcp.Server("x", website_url="example.com")
    with pytest.raises(ValueError, match=r"Server 'x': icon 1: src 'file:///a.png' must be an https: URL"):
        zemcp.Server("x", icons=[{"src": "file:///a.png"}])
    with pytest.raises(ValueError, match=r"Server 'x': description must be a string, got int"):
        zemcp.Server("x", description=3)


def test_implementation_by_version():
    server = zemcp.Server(
        "x",
        "1",
        title="X",
        description="Does x.",
        website_url="https://x.example/",
        icons=[zemcp.Icon("data:image/svg+xml,%3Csvg/%3E")],
    )
    whole = {
        "name": "x",
        "version": "1",
        "title": "X",
        "description": "Does x.",
        "websiteUrl": "https://x.example/",
        "icons": [{"src": "data:image/svg+xml,%3Csvg/%3E"}],
    }
    assert server.implementation("2026-07-28") == whole
    assert server.implementation("2025-11-25") == whole
    assert server.implementation("2025-06-18") == {"name": "x", "version": "1", "title": "X"}
    assert server.implementation("2025-03-26") == {"name": "x", "version": "1"}


@pytest.mark.parametrize(
    ("icons", "message"),
    [
        (
            [{"src": "data:text/html;base64,PGgxPg=="}],
            "tool 'lookup': icon 1: a data: icon must hold an image (data:image/png;base64,...), got the media "
            "type 'text/html'",
        ),
        ([{"src": "data:image/png;base64,!!!!"}], "tool 'lookup': icon 1: the data: icon's base64 does not decode"),
        (
            [{"src": "https://x.example/a.png", "mimeType": "text/html"}],
            "tool 'lookup': icon 1: mimeType must be an image's MIME type such as 'image/png', got 'text/html'",
        ),
        (
            [{"src": "https://x.example/a.png", "sizes": "48x48"}],
            "tool 'lookup': icon 1: sizes must be a list, not a string",
        ),
        (
            [zemcp.Icon("https://x.example/a.png", sizes="48x48")],
            "tool 'lookup': icon 1: sizes must be a list, not a string",
        ),
    ],
)
def test_an_icon_must_hold_an_image(icons, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        register("tool", icons=icons)


def test_no_icons_is_none():
    server = zemcp.Server("x", icons=None)

    @server.tool(icons=None)
    def plain() -> str:
        return "x"

    assert "icons" not in server.tools.get("plain").definition()
