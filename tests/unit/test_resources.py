"""Resources, URI templates, reads and subscriptions (zemcp.core.resources)."""

import base64
import logging

import pytest

from zemcp.core.resources import RESOURCE_NOT_FOUND, ResourceNotFound, ResourceRegistry, UriTemplate
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.pagination import encode_cursor
from zemcp.state.session import Session


@pytest.fixture
def registry():
    reg = ResourceRegistry()

    def readme():
        """The project's readme.

        Longer text that is not part of the description.
        """
        return "hello"

    reg.register(readme, "test://static-text", title="Readme")
    reg.register(lambda: b"\x00\x01\xff", "test://static-binary", name="binary", mime_type="application/octet-stream")

    def item(id):
        """One item by id."""
        return f"item {id}"

    reg.register(item, "test://template/{id}/data")
    return reg


# -- templates -------------------------------------------------------------------------


def test_template_matches_and_decodes_variables():
    t = UriTemplate("file:///{folder}/notes/{name}.md")
    assert t.variables == ["folder", "name"]
    assert t.match("file:///projects/notes/todo.md") == {"folder": "projects", "name": "todo"}
    assert t.match("file:///a%20b/notes/caf%C3%A9.md") == {"folder": "a b", "name": "caf\u00e9"}


@pytest.mark.parametrize(
    "uri",
    [
        "file:///a/b/notes/x.md",  # a value never spans '/'
        "file:///projects/notes/.md",  # nor is it empty
        "file:///projects/notes/todo.txt",
        "file:///projects/notes/todo.md?x=1",
        "xfile:///projects/notes/todo.md",
        "file:///projects/notes/x%2Fy.md",  # nor does decoding smuggle in '/', '?', '#' or NUL
        "file:///..%2F..%2Fetc/notes/passwd.md",
        "file:///projects/notes/x%3Fy.md",
        "file:///projects/notes/x%23y.md",
        "file:///projects/notes/x%00.md",
    ],
)
def test_template_does_not_match(uri):
    assert UriTemplate("file:///{folder}/notes/{name}.md").match(uri) is None


@pytest.mark.parametrize(
    "template, words",
    [
        ("test://{+path}", "level-1"),
        ("test://x{?q}", "level-1"),
        ("test://{list*}", "level-1"),
        ("test://{a}/{a}", "twice"),
        ("test://{a}{b}", "literal text"),
        ("test://{a", "unbalanced"),
        ("test://a}/{b}", "unbalanced"),
        ("test://{}", "level-1"),
    ],
)
def test_bad_templates_are_refused(template, words):
    with pytest.raises(ValueError, match=words):
        UriTemplate(template)


# -- registration and listing -------------------------------------------------------------


def test_definitions_and_defaults(registry):
    """name defaults to the function name, description to the docstring's first paragraph."""
    listed = registry.list_result({}, 100)
    assert listed == {
        "resources": [
            {
                "uri": "test://static-text",
                "name": "readme",
                "title": "Readme",
                "description": "The project's readme.",
                "mimeType": "text/plain",
            },
            {"uri": "test://static-binary", "name": "binary", "mimeType": "application/octet-stream"},
        ]
    }
    assert registry.templates_result({}, 100) == {
        "resourceTemplates": [
            {
                "uriTemplate": "test://template/{id}/data",
                "name": "item",
                "description": "One item by id.",
                "mimeType": "text/plain",
            },
        ]
    }
    assert len(registry) == 3 and len(ResourceRegistry()) == 0


def test_optional_members_are_left_out_and_size_is_listed():
    reg = ResourceRegistry()
    reg.register(lambda: "x", "test://a", name="a", mime_type=None, size=1)
    assert reg.list_result({}, 10) == {"resources": [{"uri": "test://a", "name": "a", "size": 1}]}


def test_listing_is_paginated():
    reg = ResourceRegistry()
    for i in range(5):
        reg.register(lambda: "x", f"test://r{i}", name=f"r{i}")
    first = reg.list_result({}, 2)
    assert [r["name"] for r in first["resources"]] == ["r0", "r1"] and first["nextCursor"] == encode_cursor(2)
    last = reg.list_result({"cursor": encode_cursor(4)}, 2)
    assert [r["name"] for r in last["resources"]] == ["r4"] and "nextCursor" not in last
    with pytest.raises(ProtocolError) as info:
        reg.templates_result({"cursor": "nope"}, 2)
    assert info.value.code == INVALID_PARAMS


@pytest.mark.parametrize(
    "uri, kwargs, handler, words",
    [
        ("test://static-text", {}, lambda: "x", "already registered"),
        ("test://template/{id}/data", {}, lambda id: "x", "already registered"),
        ("no-scheme", {}, lambda: "x", "scheme"),
        ("/{id}", {}, lambda id: "x", "scheme"),
        ("test://s", {}, lambda x: "x", "without arguments"),
        ("test://{a}/{b}", {}, lambda a: "x", "a, b"),
        ("test://{a}", {}, lambda a, b: "x", "need no others"),
        ("test://{a}", {"size": 3}, lambda a: "x", "static resources only"),
        ("test://s", {"size": -1}, lambda: "x", "non-negative"),
        ("test://s", {"name": ""}, lambda: "x", "non-empty"),
    ],
)
def test_bad_registrations_are_refused(registry, uri, kwargs, handler, words):
    with pytest.raises(ValueError, match=words):
        registry.register(handler, uri, **kwargs)


# -- reading ------------------------------------------------------------------------------


def test_read_text_binary_and_template(registry):
    assert registry.read({"uri": "test://static-text"}) == {
        "contents": [{"uri": "test://static-text", "mimeType": "text/plain", "text": "hello"}]
    }
    binary = registry.read({"uri": "test://static-binary"})["contents"][0]
    assert binary["mimeType"] == "application/octet-stream" and "text" not in binary
    assert base64.b64decode(binary["blob"]) == b"\x00\x01\xff"
    assert registry.read({"uri": "test://template/123/data"}) == {
        "contents": [{"uri": "test://template/123/data", "mimeType": "text/plain", "text": "item 123"}]
    }


def test_read_a_list_of_contents_fills_uri_and_mime_type():
    reg = ResourceRegistry()
    reg.register(
        lambda: ["a", b"b", {"text": "{}", "mimeType": "application/json"}, {"uri": "test://many#2", "blob": "AA=="}],
        "test://many",
        name="many",
    )
    assert reg.read({"uri": "test://many"})["contents"] == [
        {"uri": "test://many", "mimeType": "text/plain", "text": "a"},
        {"uri": "test://many", "mimeType": "text/plain", "blob": base64.b64encode(b"b").decode()},
        {"uri": "test://many", "mimeType": "application/json", "text": "{}"},
        {"uri": "test://many#2", "mimeType": "text/plain", "blob": "AA=="},
    ]


def test_static_resources_win_over_templates_and_the_first_template_wins():
    reg = ResourceRegistry()
    reg.register(lambda name: f"first {name}", "test://x/{name}", name="first")
    reg.register(lambda other: f"second {other}", "test://{other}/fixed", name="second")
    reg.register(lambda: "static", "test://x/static", name="static")
    assert reg.read({"uri": "test://x/static"})["contents"][0]["text"] == "static"
    assert reg.read({"uri": "test://x/fixed"})["contents"][0]["text"] == "first fixed"
    assert reg.read({"uri": "test://y/fixed"})["contents"][0]["text"] == "second y"


def test_unknown_uri_is_resource_not_found_with_the_uri_as_data(registry):
    with pytest.raises(ResourceNotFound) as info:
        registry.read({"uri": "test://missing"})
    assert info.value.code == RESOURCE_NOT_FOUND == -32002
    assert info.value.data == {"uri": "test://missing"}
    assert info.value.message.startswith("Resource not found: test://missing")
    assert info.value.to_message()["error"]["data"] == {"uri": "test://missing"}


def test_a_template_handler_may_report_not_found():
    reg = ResourceRegistry()

    def item(id):
        if id != "1":
            raise ResourceNotFound(f"test://item/{id}")
        return "one"

    reg.register(item, "test://item/{id}")
    assert reg.read({"uri": "test://item/1"})["contents"][0]["text"] == "one"
    with pytest.raises(ResourceNotFound) as info:
        reg.read({"uri": "test://item/2"})
    assert info.value.data == {"uri": "test://item/2"}


@pytest.mark.parametrize("params", [{}, {"uri": None}, {"uri": 5}, {"uri": ""}])
def test_read_needs_a_uri_string(registry, params):
    with pytest.raises(ProtocolError) as info:
        registry.read(params)
    assert info.value.code == INVALID_PARAMS and "params.uri" in info.value.message


def test_a_failing_handler_is_an_internal_error_naming_the_resource(caplog):
    reg = ResourceRegistry()

    def broken():
        raise RuntimeError("secret detail")

    reg.register(broken, "test://broken")
    with caplog.at_level(logging.ERROR, logger="zemcp.resources"), pytest.raises(ProtocolError) as info:
        reg.read({"uri": "test://broken"})
    assert info.value.code == INTERNAL_ERROR
    assert "test://broken" in info.value.message and "RuntimeError" in info.value.message
    assert "secret detail" not in info.value.message
    assert "secret detail" in caplog.text


@pytest.mark.parametrize("value", [42, None, {"neither": "x"}, {"text": 5}, ["ok", 3]])
def test_a_handler_returning_no_contents_is_an_internal_error(value):
    reg = ResourceRegistry()
    reg.register(lambda: value, "test://odd", name="odd")
    with pytest.raises(ProtocolError) as info:
        reg.read({"uri": "test://odd"})
    assert info.value.code == INTERNAL_ERROR and "test://odd" in info.value.message


# -- subscriptions ------------------------------------------------------------------------


def test_subscribe_and_unsubscribe_are_kept_by_the_session(registry):
    s1, s2 = Session("2025-11-25", {}, {}), Session("2025-11-25", {}, {})
    assert registry.subscribe(s1, {"uri": "test://static-text"}) == {}
    assert registry.subscribe(s2, {"uri": "test://static-text"}) == {}
    assert registry.subscribe(s2, {"uri": "test://template/7/data"}) == {}
    assert registry.subscribe(s1, {"uri": "test://static-text"}) == {}  # again: no duplicate
    assert s1.subscribed("test://static-text") and not s1.subscribed("test://template/7/data")
    assert s2.subscribed("test://template/7/data")
    assert registry.unsubscribe(s1, {"uri": "test://static-text"}) == {}
    assert registry.unsubscribe(s1, {"uri": "test://static-text"}) == {}  # not subscribed: still {}
    assert not s1.subscribed("test://static-text") and s2.subscribed("test://static-text")


def test_subscriptions_per_session_are_capped(registry, monkeypatch):
    monkeypatch.setattr("zemcp.core.resources.MAX_SUBSCRIPTIONS_PER_SESSION", 1)
    session = Session("2025-11-25", {}, {})
    assert registry.subscribe(session, {"uri": "test://static-text"}) == {}
    with pytest.raises(ProtocolError, match="already holds 1 resource subscriptions"):
        registry.subscribe(session, {"uri": "test://template/7/data"})


def test_subscribe_to_an_unknown_uri_is_not_found(registry):
    session = Session("2025-11-25", {}, {})
    with pytest.raises(ResourceNotFound):
        registry.subscribe(session, {"uri": "test://missing"})
    assert not session.subscribed("test://missing")
