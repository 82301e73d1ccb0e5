"""Resources, prompts, completion and list pagination through the WSGI app (werkzeug test client).

The server is built with the authoring API (``@server.resource``, ``@server.prompt``,
``@server.completion``) and driven over HTTP in-process, the way a client sees it.
"""

import base64
import json
from typing import Annotated

import pytest

import zemcp
from tests.support.clients import HandshakeClient, inprocess_session
from zemcp import Settings

PNG = b"\x89PNG\r\n\x1a\n"


def build_server() -> zemcp.Server:
    server = zemcp.Server("resources-prompts", "1.0", settings=Settings(threads=4))

    @server.resource("test://static-text", title="Static text")
    def static_text():
        """A static text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary():
        return PNG

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template_data(id):
        """Data of one item."""
        return json.dumps({"id": id})

    @server.resource("test://watched-resource")
    def watched():
        return "watched"

    @server.resource("test://broken")
    def broken():
        raise RuntimeError("disk on fire")

    @server.prompt
    def test_simple_prompt():
        """A prompt without arguments."""
        return "This is a simple prompt."

    @server.prompt("test_prompt_with_arguments", title="With arguments")
    def with_arguments(arg1: Annotated[str, "First argument"], arg2: str = "default"):
        """A prompt with arguments.

        Args:
            arg2: Second argument.
        """
        return [f"arg1={arg1}", {"role": "assistant", "content": {"type": "text", "text": f"arg2={arg2}"}}]

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str):
        """A prompt embedding a resource."""
        return [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {"uri": resourceUri, "mimeType": "text/plain", "text": "embedded"},
                },
            },
            "Use the resource above.",
        ]

    @server.completion(prompt="test_prompt_with_arguments")
    def complete_args(argument, value, context):
        return [v for v in ("alpha", "beta", "bravo") if v.startswith(value)]

    @server.completion(resource="test://template/{id}/data")
    def complete_ids(argument, value, context):
        return [str(i) for i in range(150) if str(i).startswith(value)]

    return server


def session(app) -> HandshakeClient:
    """A 2025-06-18 session without client capabilities."""
    return inprocess_session(app, capabilities={})


def walk(peer: HandshakeClient, method: str, key: str) -> tuple[list, int]:
    """Every item of a paginated list, and how many pages it took."""
    items, pages, params = [], 0, {}
    while True:
        result = peer.rpc(method, params)
        items += result[key]
        pages += 1
        if "nextCursor" not in result:
            return items, pages
        params = {"cursor": result["nextCursor"]}


@pytest.fixture
def server():
    return build_server()


@pytest.fixture
def peer(server):
    return session(zemcp.McpApp(server))


# -- resources ----------------------------------------------------------------------------


def test_resources_list_and_templates_list(peer):
    listed = peer.rpc("resources/list")
    assert [r["uri"] for r in listed["resources"]] == [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
        "test://broken",
    ]
    assert listed["resources"][0] == {
        "uri": "test://static-text",
        "name": "static_text",
        "title": "Static text",
        "description": "A static text resource.",
        "mimeType": "text/plain",
    }
    assert all(r["uri"] and r["name"] for r in listed["resources"])
    assert peer.rpc("resources/templates/list") == {
        "resourceTemplates": [
            {
                "uriTemplate": "test://template/{id}/data",
                "name": "template_data",
                "description": "Data of one item.",
                "mimeType": "application/json",
            }
        ]
    }


def test_resources_read_text_binary_and_template(peer):
    text = peer.rpc("resources/read", {"uri": "test://static-text"})["contents"]
    assert text == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    binary = peer.rpc("resources/read", {"uri": "test://static-binary"})["contents"][0]
    assert binary["uri"] == "test://static-binary" and binary["mimeType"] == "image/png"
    assert base64.b64decode(binary["blob"]) == PNG
    item = peer.rpc("resources/read", {"uri": "test://template/123/data"})["contents"][0]
    assert item["mimeType"] == "application/json" and json.loads(item["text"]) == {"id": "123"}


def test_resources_read_errors(peer):
    missing = peer.rpc_error("resources/read", {"uri": "test://nothing-here"})
    assert missing["code"] == -32002 and missing["data"] == {"uri": "test://nothing-here"}
    assert "test://nothing-here" in missing["message"]
    failed = peer.rpc_error("resources/read", {"uri": "test://broken"})
    assert failed["code"] == -32603 and "test://broken" in failed["message"] and "disk on fire" not in failed["message"]
    assert peer.rpc_error("resources/read", {})["code"] == -32602


def test_subscribe_and_unsubscribe_are_recorded_per_session(server, peer):
    other = session(zemcp.McpApp(server))
    assert peer.rpc("resources/subscribe", {"uri": "test://watched-resource"}) == {}
    assert other.rpc("resources/subscribe", {"uri": "test://watched-resource"}) == {}
    mine, theirs = server.sessions.get(peer.session_id), server.sessions.get(other.session_id)
    assert mine.subscribed("test://watched-resource") and theirs.subscribed("test://watched-resource")
    assert peer.rpc("resources/unsubscribe", {"uri": "test://watched-resource"}) == {}
    assert not mine.subscribed("test://watched-resource") and theirs.subscribed("test://watched-resource")
    assert peer.rpc_error("resources/subscribe", {"uri": "test://nothing-here"})["code"] == -32002


# -- prompts ------------------------------------------------------------------------------


def test_prompts_list(peer):
    prompts = peer.rpc("prompts/list")["prompts"]
    assert prompts == [
        {"name": "test_simple_prompt", "description": "A prompt without arguments.", "arguments": []},
        {
            "name": "test_prompt_with_arguments",
            "title": "With arguments",
            "description": "A prompt with arguments.",
            "arguments": [
                {"name": "arg1", "description": "First argument", "required": True},
                {"name": "arg2", "description": "Second argument.", "required": False},
            ],
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt embedding a resource.",
            "arguments": [{"name": "resourceUri", "required": True}],
        },
    ]


def test_prompts_get(peer):
    simple = peer.rpc("prompts/get", {"name": "test_simple_prompt"})
    assert simple["messages"] == [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt."}}]
    got = peer.rpc("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}})
    assert got == {
        "description": "A prompt with arguments.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "arg1=a"}},
            {"role": "assistant", "content": {"type": "text", "text": "arg2=b"}},
        ],
    }
    embedded = peer.rpc(
        "prompts/get",
        {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://static-text"}},
    )["messages"]
    assert embedded[0]["content"]["type"] == "resource"
    assert embedded[0]["content"]["resource"]["uri"] == "test://static-text"
    assert embedded[1] == {"role": "user", "content": {"type": "text", "text": "Use the resource above."}}


@pytest.mark.parametrize(
    "params, words",
    [
        ({"name": "no_such_prompt"}, "no_such_prompt"),
        ({"name": "test_prompt_with_arguments", "arguments": {"arg2": "b"}}, "arg1"),
        ({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg3": "c"}}, "arg3"),
    ],
)
def test_prompts_get_errors_are_invalid_params(peer, params, words):
    error = peer.rpc_error("prompts/get", params)
    assert error["code"] == -32602 and words in error["message"]


# -- completion ---------------------------------------------------------------------------


def test_completion_for_a_prompt_argument(peer):
    result = peer.rpc(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "b"},
            "context": {"arguments": {"arg2": "x"}},
        },
    )
    assert result == {"completion": {"values": ["beta", "bravo"], "total": 2, "hasMore": False}}


def test_completion_for_a_template_variable_is_capped(peer):
    result = peer.rpc(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"}, "argument": {"name": "id", "value": ""}},
    )
    assert len(result["completion"]["values"]) == 100
    assert result["completion"]["total"] == 150 and result["completion"]["hasMore"] is True


def test_completion_without_provider_and_for_unknown_refs(peer):
    empty = peer.rpc(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_embedded_resource"},
            "argument": {"name": "resourceUri", "value": "test://"},
        },
    )
    assert empty == {"completion": {"values": [], "total": 0, "hasMore": False}}
    error = peer.rpc_error(
        "completion/complete", {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}}
    )
    assert error["code"] == -32602 and "nope" in error["message"]
    assert (
        peer.rpc_error("completion/complete", {"ref": {"type": "ref/prompt", "name": "test_simple_prompt"}})["code"]
        == -32602
    )


# -- pagination -----------------------------------------------------------------------------


def test_every_list_is_paginated():
    """With more items than fit a page, tools/list, resources/list, resources/templates/list and
    prompts/list each hand out cursors, and following them yields every item once, in order."""
    server = zemcp.Server("many", settings=Settings(threads=4))
    n = 250
    for i in range(n):
        server.tool(f"tool{i}")(lambda: "x")
        server.resource(f"test://r/{i}", name=f"r{i}")(lambda: "x")
        server.resource(f"test://t{i}/{{id}}", name=f"t{i}")(lambda id: "x")
        server.prompt(f"p{i}")(lambda: "x")
    peer = session(zemcp.McpApp(server))
    for method, key, field, prefix in [
        ("tools/list", "tools", "name", "tool"),
        ("resources/list", "resources", "name", "r"),
        ("resources/templates/list", "resourceTemplates", "name", "t"),
        ("prompts/list", "prompts", "name", "p"),
    ]:
        items, pages = walk(peer, method, key)
        assert [item[field] for item in items] == [f"{prefix}{i}" for i in range(n)], method
        assert pages > 1, method


@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list"])
def test_an_invalid_cursor_is_invalid_params(peer, method):
    error = peer.rpc_error(method, {"cursor": "not-a-cursor"})
    assert error["code"] == -32602 and "invalid cursor" in error["message"]


def test_prompt_result_json_cannot_carry_is_an_internal_error():
    """A prompt whose messages hold a value JSON cannot carry is answered -32603, not a 500."""
    import datetime

    server = zemcp.Server("p", "1", settings=Settings(threads=4))

    @server.prompt
    def dated():
        """A prompt with a datetime inside."""
        return [{"role": "user", "content": {"type": "text", "text": datetime.datetime(2026, 1, 1)}}]

    client = inprocess_session(
        zemcp.McpApp(server), name="c", version="1", protocol_version="2025-11-25", capabilities={}
    )
    r = client.post({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "dated"}})
    assert r.status_code == 200 and r.get_json()["id"] == 2 and r.get_json()["error"]["code"] == -32603
