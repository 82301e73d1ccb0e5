"""The stateless 2026-07-28 era driven in-process through werkzeug's test client.

Era selection, the envelope and SEP-2243 headers, error codes and statuses, result
decoration, multi-round-trip replay with sealed requestState, capability errors, logging
and progress, prompts and resources that elicit, and subscriptions/listen. The same flows
over real HTTP under gunicorn, with real clients, are in tests/integration.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

import zemcp
from tests.support.clients import (
    ACCEPT,
    ALL_CAPABILITIES,
    LATEST_VERSION,
    MODERN_VERSION,
    ModernClient,
    envelope,
    inprocess_modern,
    inprocess_session,
)
from tests.support.sse import SseStream, sse_messages
from zemcp import Settings

VERSION = MODERN_VERSION
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


SIDE_EFFECTS: list[str] = []


def make_app(**settings: Any):
    server = zemcp.Server(
        "modern-fixture",
        "2.0",
        instructions="try me",
        settings=Settings(**{"keepalive_interval": 0.05, "elicitation_timeout": 30, "threads": 12, **settings}),
    )

    @server.tool
    def greet(ctx: zemcp.Context) -> str:
        """Ask for a name, then greet."""
        answer = ctx.elicit("What is your name?", NAME, key="user_name")
        SIDE_EFFECTS.append(answer["name"])
        return f"Hello, {answer['name']}!"

    @server.tool
    def two_steps(ctx: zemcp.Context, prefix: str = "") -> str:
        """Two questions in two rounds."""
        name = ctx.elicit("Step 1: name?", NAME, key="step1")["name"]
        color = ctx.elicit(
            f"Step 2: {name}, colour?", {"type": "object", "properties": {"color": {"type": "string"}}}, key="step2"
        )["color"]
        return f"{prefix}{name} likes {color}"

    @server.tool
    def all_at_once(ctx: zemcp.Context) -> str:
        """Three questions in one round."""
        person, sampled, roots = ctx.ask_all(
            zemcp.Elicit("Name?", NAME, key="user_name"),
            zemcp.Sample("Greet", 50, key="greeting"),
            zemcp.ListRoots(key="client_roots"),
        )
        return f"{person['name']}; {sampled['content']['text']}; {len(roots)} root(s)"

    @server.tool
    def unkeyed(ctx: zemcp.Context) -> str:
        """Questions named by position."""
        first = ctx.elicit("First?", NAME)["name"]
        second = ctx.elicit("Second?", NAME)["name"]
        return first + second

    @server.tool
    def needs_sampling(ctx: zemcp.Context) -> str:
        """Samples without checking the capability."""
        return ctx.sample("hi", 10)["content"]["text"]

    @server.tool
    def adapts(ctx: zemcp.Context) -> str:
        """Falls back when elicitation is not declared."""
        try:
            return ctx.elicit("Name?", NAME)["name"]
        except zemcp.ElicitUnsupported:
            return "no elicitation: fallback"

    @server.tool
    def fickle(ctx: zemcp.Context, flip: str = "") -> str:
        """Asks a question that changes between rounds (breaks the replay contract)."""
        first = ctx.elicit(f"Question {len(SIDE_EFFECTS)}", NAME)
        SIDE_EFFECTS.append("asked")
        return ctx.elicit("again", NAME)["name"] + first["name"]

    @server.tool
    def clock(ctx: zemcp.Context) -> str:
        """Asks a question that is different every time."""
        SIDE_EFFECTS.append("tick")
        return ctx.elicit(f"Question {len(SIDE_EFFECTS)}?", NAME, key="q")["name"]

    @server.tool
    def until_valid(ctx: zemcp.Context) -> str:
        """Asks again under the same key until the answer is not 'no'."""
        for attempt in range(5):
            name = ctx.elicit("Name?", NAME, key="name")["name"]
            if name != "no":
                return f"{name} after {attempt + 1}"
        return "gave up"

    @server.tool
    def swallow(ctx: zemcp.Context) -> str:
        """Catches everything, also the end of the round."""
        try:
            ctx.elicit("Name?", NAME)
        except BaseException:  # the point of the test
            pass
        return "swallowed"

    @server.tool
    def chatty(ctx: zemcp.Context) -> str:
        """Logs and reports progress."""
        ctx.log("info", "working")
        ctx.log("debug", "details")
        for step in (1, 2, 3):
            ctx.report_progress(step, 3)
        return "done"

    @server.tool
    def regional(region: Annotated_region, count: int = 0) -> str:
        """Mirrors region into Mcp-Param-Region."""
        return f"{region}:{count}"

    @server.prompt
    def with_context(ctx: zemcp.Context) -> str:
        """A prompt that asks for context first."""
        return (
            "Prompt with context: "
            + ctx.elicit(
                "Context?",
                {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
                key="user_context",
            )["context"]
        )

    @server.resource("test://asked", name="asked")
    def asked(ctx: zemcp.Context) -> str:
        """A resource whose read asks which variant."""
        return (
            "variant "
            + ctx.elicit(
                "Variant?",
                {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]},
                key="variant",
            )["v"]
        )

    @server.resource("test://plain", name="plain")
    def plain() -> str:
        return "plain text"

    return zemcp.McpApp(server), server


Annotated_region = __import__("typing").Annotated[str, zemcp.McpHeader("Region")]


@pytest.fixture
def fixture():
    SIDE_EFFECTS.clear()
    app, server = make_app()
    return inprocess_modern(app), server


@pytest.fixture
def client(fixture):
    return fixture[0]


# -- era selection, envelope, headers -------------------------------------------------------


def test_an_enveloped_request_is_served_statelessly(client):
    """A request with the envelope needs no initialize and gets no Mcp-Session-Id."""
    r = client.request("tools/list")
    assert r.status_code == 200 and "Mcp-Session-Id" not in r.headers
    result = client.result(r)
    assert result["resultType"] == "complete" and [t["name"] for t in result["tools"]][0] == "greet"


def test_a_session_header_on_a_modern_request_is_ignored(client):
    """Mcp-Session-Id on an enveloped request is neither required nor echoed."""
    r = client.request("tools/list", headers={"Mcp-Session-Id": "nonsense.id"})
    assert r.status_code == 200 and "Mcp-Session-Id" not in r.headers


def test_initialize_still_starts_a_handshake_session(client):
    """initialize without the envelope starts a session as before, never at 2026-07-28."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    r = client.wire.raw("POST", data=json.dumps(body), content_type="application/json", headers={"Accept": ACCEPT})
    assert r.status_code == 200 and r.headers["Mcp-Session-Id"]
    assert r.get_json()["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    "params, missing",
    [
        ({}, "params._meta"),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, "protocolVersion"),
        ({"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}, "clientCapabilities"),
        (
            {"_meta": {"io.modelcontextprotocol/protocolVersion": 7, "io.modelcontextprotocol/clientCapabilities": {}}},
            "must be a string",
        ),
        (
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": [],
                }
            },
            "must be an object",
        ),
        ({"_meta": {**envelope(ALL_CAPABILITIES), "io.modelcontextprotocol/logLevel": "loud"}}, "logLevel"),
    ],
)
def test_a_bad_envelope_is_400_invalid_params(client, params, missing):
    """A missing or malformed envelope field is HTTP 400 with -32602 naming it (the header says modern)."""
    error = client.error(client.request("server/discover", params, envelope=False), 400, -32602)
    assert missing in error["message"]


def test_client_info_is_optional(client):
    """A request without clientInfo is served."""
    params = {
        "_meta": {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    }
    assert client.request("server/discover", params, envelope=False).status_code == 200


@pytest.mark.parametrize(
    "headers, word",
    [
        ({"Mcp-Method": None}, "Mcp-Method"),
        ({"Mcp-Method": "prompts/list"}, "Mcp-Method"),
        ({"Mcp-Method": "TOOLS/LIST"}, "Mcp-Method"),
        ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version"),
    ],
)
def test_standard_header_mismatch_is_400_header_mismatch(client, headers, word):
    """A missing or different Mcp-Method or MCP-Protocol-Version is HTTP 400 with -32020."""
    assert word in client.error(client.request("tools/list", headers=headers), 400, -32020)["message"]


def test_mcp_name_must_match_the_tool(client):
    """tools/call with a wrong or missing Mcp-Name is -32020; surrounding blanks are ignored."""
    client.error(client.call_tool("greet", headers={"Mcp-Name": "other"})[1], 400, -32020)
    client.error(client.call_tool("greet", headers={"Mcp-Name": None})[1], 400, -32020)
    assert (
        client.result(client.call_tool("greet", headers={"Mcp-Name": "  greet  "})[1])["resultType"] == "input_required"
    )


def test_version_mismatch_comes_before_unsupported_version(client):
    """Header 2026-07-28 with an envelope of another version is -32020, not -32022."""
    client.error(
        client.request("tools/list", meta={"io.modelcontextprotocol/protocolVersion": "v999.0.0"}), 400, -32020
    )


def test_an_unsupported_version_names_what_is_served(client):
    """An unknown version in both header and envelope is 400 -32022 with supported and requested."""
    r = client.request(
        "server/discover",
        meta={"io.modelcontextprotocol/protocolVersion": "v999.0.0"},
        headers={"MCP-Protocol-Version": "v999.0.0"},
    )
    error = client.error(r, 400, -32022)
    assert error["data"]["requested"] == "v999.0.0"
    discovered = client.result(client.request("server/discover"))["supportedVersions"]
    assert VERSION in error["data"]["supported"] and set(error["data"]["supported"]) <= set(discovered)


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"],
)
def test_removed_and_unknown_methods_are_404(client, method):
    """Methods 2026-07-28 removed, and unknown ones, are HTTP 404 with -32601 and the request's id."""
    r = client.request(method)
    client.error(r, 404, -32601)
    assert r.get_json()["id"] is not None


def test_get_and_delete_without_a_session_are_405(client):
    """GET and a DELETE without Mcp-Session-Id are 405 with Allow (both need a session)."""
    for method in ("GET", "DELETE"):
        r = client.wire.raw(method, headers={"Accept": ACCEPT})
        assert r.status_code == 405 and r.headers["Allow"] == "GET, POST, DELETE, OPTIONS"
        assert "Mcp-Session-Id" in r.get_json()["error"]["message"]


def test_a_notification_is_accepted(client):
    """An id-less modern message is answered 202 with no body."""
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": client.meta(), "requestId": 1}}
    r = client.wire.raw(
        "POST",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Accept": ACCEPT, "MCP-Protocol-Version": VERSION},
    )
    assert r.status_code == 202 and r.get_data() == b""


def test_param_headers_are_checked_against_the_body(client):
    """An x-mcp-header argument must be mirrored in Mcp-Param-<name>; base64 form decoded."""
    ok = client.call_tool("regional", {"region": "eu-west"}, headers={"Mcp-Param-Region": "eu-west"})[1]
    assert client.result(ok)["content"][0]["text"] == "eu-west:0"
    encoded = client.call_tool(
        "regional", {"region": "Zürich"}, headers={"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="}
    )[1]
    assert client.result(encoded)["content"][0]["text"] == "Zürich:0"
    client.error(client.call_tool("regional", {"region": "eu-west"})[1], 400, -32020)
    client.error(
        client.call_tool("regional", {"region": "eu-west"}, headers={"Mcp-Param-Region": "us-east"})[1], 400, -32020
    )


# -- results ---------------------------------------------------------------------------------


def test_discover_describes_the_server(fixture):
    """server/discover: versions, capabilities, instructions, serverInfo in _meta, caching hints."""
    client, server = fixture
    result = client.initialize()
    assert result["supportedVersions"][0] == VERSION and "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert result["capabilities"]["resources"] == {"listChanged": True, "subscribe": True}
    assert result["instructions"] == "try me"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "modern-fixture", "version": "2.0"}
    assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (0, "private", "complete")


@pytest.mark.parametrize(
    "method, params",
    [
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("resources/read", {"uri": "test://plain"}),
    ],
)
def test_cacheable_results_carry_caching_hints(client, method, params):
    """Lists and resources/read carry ttlMs and cacheScope, every result resultType and serverInfo."""
    result = client.result(client.request(method, params))
    assert result["ttlMs"] == 0 and result["cacheScope"] == "private" and result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "modern-fixture"


def test_a_missing_resource_is_invalid_params_with_the_uri(client):
    """resources/read of an unknown URI is -32602 with data.uri (2026-07-28 retired -32002)."""
    error = client.error(client.request("resources/read", {"uri": "test://nope"}), 400, -32602)
    assert error["data"] == {"uri": "test://nope"}


# -- multi-round-trip ----------------------------------------------------------------------


def test_an_elicitation_takes_two_rounds_and_side_effects_happen_once(client):
    """Round 1 asks (input_required, sealed state); round 2 with the answer completes; the handler's side effect runs once."""
    first = client.result(client.call_tool("greet")[1])
    assert first["resultType"] == "input_required"
    question = first["inputRequests"]["user_name"]
    assert question["method"] == "elicitation/create" and question["params"]["requestedSchema"] == NAME
    assert first["requestState"].startswith("v1.") and SIDE_EFFECTS == []
    done = client.result(
        client.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": "Alice"}}})[1]
    )
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Alice!"
    assert SIDE_EFFECTS == ["Alice"]


def test_answers_without_request_state_are_taken_by_key(client):
    """A first request that already answers by key completes; unknown extra keys are ignored."""
    responses = {
        "user_name": {"action": "accept", "content": {"name": "Bo"}},
        "extra": {"action": "accept", "content": {}},
    }
    done = client.result(client.call_tool("greet", input_responses=responses)[1])
    assert done["content"][0]["text"] == "Hello, Bo!"


def test_a_missing_answer_is_asked_again(client):
    """A retry whose inputResponses lack the asked key gets the question again."""
    first = client.result(client.call_tool("greet")[1])
    again = client.result(
        client.answer("greet", first, {"wrong_key": {"action": "accept", "content": {"name": "x"}}})[1]
    )
    assert again["resultType"] == "input_required" and "user_name" in again["inputRequests"]


def test_an_answer_under_a_key_nobody_asked_is_named_when_the_question_comes_back(client, caplog):
    """The question comes back and a warning names the ignored keys and the one asked, with or
    without requestState; extra keys beside the right answer are ignored without a word."""
    caplog.set_level("WARNING", logger="zemcp.mrtr")
    wrong = {"name": {"action": "accept", "content": {"name": "x"}}}
    first = client.result(client.call_tool("greet", input_responses=wrong)[1])
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"]
    again = client.result(client.answer("greet", first, {**wrong, "other": {}})[1])
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]
    said = [r.getMessage() for r in caplog.records if "inputResponses" in r.getMessage()]
    assert said == [
        "tools/call 'greet': the inputResponses under 'name' answered no question of this round and were ignored; "
        "the round asks again under 'user_name' (an answer goes under the key of its inputRequests entry)",
        "tools/call 'greet': the inputResponses under 'name', 'other' answered no question of this round and were "
        "ignored; the round asks again under 'user_name' (an answer goes under the key of its inputRequests entry)",
    ]
    caplog.clear()
    done = client.result(
        client.answer("greet", again, {**wrong, "user_name": {"action": "accept", "content": {"name": "A"}}})[1]
    )
    assert done["content"][0]["text"] == "Hello, A!"
    assert not [r for r in caplog.records if "inputResponses" in r.getMessage()]


def test_a_flood_of_ignored_keys_is_counted_not_listed(client, caplog):
    """A log line names five ignored keys at most, and counts the rest."""
    caplog.set_level("WARNING", logger="zemcp.mrtr")
    flood = {f"k{n}": {} for n in range(40)}
    assert client.result(client.call_tool("greet", input_responses=flood)[1])["resultType"] == "input_required"
    [said] = [r.getMessage() for r in caplog.records if "inputResponses" in r.getMessage()]
    assert "under 'k0', 'k1', 'k2', 'k3', 'k4' and 35 more answered no question" in said, said


@pytest.mark.parametrize("responses", [{"user_name": 12345}, [1, 2]])
def test_malformed_input_responses_are_invalid_params(client, responses):
    """inputResponses that are not an object of result objects are -32602."""
    client.error(client.call_tool("greet", input_responses=responses)[1], 400, -32602)


def test_null_input_responses_count_as_none(client):
    """inputResponses: null asks the question (it is not an answer)."""
    r = client.request("tools/call", {"name": "greet", "arguments": {}, "inputResponses": None})
    assert client.result(r)["resultType"] == "input_required"


def test_an_answer_failing_the_schema_is_a_tool_error(client):
    """Accepted content outside requestedSchema is ElicitMalformed in the handler: an isError result."""
    first = client.result(client.call_tool("greet")[1])
    done = client.result(client.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": 5}}})[1])
    assert done["isError"] is True and "malformed elicitation answer" in done["content"][0]["text"]


@pytest.mark.parametrize("action, text", [("decline", "declined"), ("cancel", "cancelled")])
def test_decline_and_cancel_reach_the_handler(client, action, text):
    """decline and cancel raise the same exceptions as in the handshake era."""
    first = client.result(client.call_tool("greet")[1])
    done = client.result(client.answer("greet", first, {"user_name": {"action": action}})[1])
    assert done["isError"] is True and text in done["content"][0]["text"]


def test_multi_round_state_evolves(client):
    """Two questions in sequence: three rounds, each requestState different, then complete."""
    r1 = client.result(client.call_tool("two_steps")[1])
    assert list(r1["inputRequests"]) == ["step1"]
    r2 = client.result(client.answer("two_steps", r1, {"step1": {"action": "accept", "content": {"name": "Alice"}}})[1])
    assert list(r2["inputRequests"]) == ["step2"] and r2["requestState"] != r1["requestState"]
    assert r2["inputRequests"]["step2"]["params"]["message"] == "Step 2: Alice, colour?"
    r3 = client.result(client.answer("two_steps", r2, {"step2": {"action": "accept", "content": {"color": "blue"}}})[1])
    assert r3["content"][0]["text"] == "Alice likes blue"


def test_several_questions_share_one_round(client):
    """ask_all puts elicitation, sampling and roots in one InputRequiredResult."""
    r1 = client.result(client.call_tool("all_at_once")[1])
    assert {k: v["method"] for k, v in r1["inputRequests"].items()} == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    answers = {
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello there!"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///r", "name": "R"}]},
    }
    done = client.result(client.answer("all_at_once", r1, answers)[1])
    assert done["content"][0]["text"] == "Alice; Hello there!; 1 root(s)"


def test_a_partial_answer_is_held_until_the_rest_arrives(client):
    """Answering only the later questions of a round keeps them; the missing one is asked again."""
    r1 = client.result(client.call_tool("all_at_once")[1])
    partial = {
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": []},
    }
    r2 = client.result(client.answer("all_at_once", r1, partial)[1])
    assert list(r2["inputRequests"]) == ["user_name"]
    done = client.result(
        client.answer("all_at_once", r2, {"user_name": {"action": "accept", "content": {"name": "Z"}}})[1]
    )
    assert done["content"][0]["text"] == "Z; Hi; 0 root(s)"


def test_unkeyed_questions_are_named_by_position(client):
    """Questions without a key are elicitation-1, elicitation-2, ... across rounds."""
    r1 = client.result(client.call_tool("unkeyed")[1])
    assert list(r1["inputRequests"]) == ["elicitation-1"]
    r2 = client.result(
        client.answer("unkeyed", r1, {"elicitation-1": {"action": "accept", "content": {"name": "a"}}})[1]
    )
    assert list(r2["inputRequests"]) == ["elicitation-2"]


def test_tampered_request_state_is_refused(client):
    """A requestState with one character changed is 400 -32602 with reason invalid_request_state."""
    first = client.result(client.call_tool("greet")[1])
    token = first["requestState"]
    first["requestState"] = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    error = client.error(
        client.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": "x"}}})[1], 400, -32602
    )
    assert error["data"] == {"reason": "invalid_request_state"}
    first["requestState"] = token + "-TAMPERED"
    client.error(client.answer("greet", first, {})[1], 400, -32602)


def test_request_state_is_bound_to_the_tool_and_arguments(client):
    """A state made for other arguments or another tool is refused."""
    first = client.result(client.call_tool("two_steps", {"prefix": "a"})[1])
    step = {"step1": {"action": "accept", "content": {"name": "n"}}}
    client.error(client.answer("two_steps", first, step, {"prefix": "b"})[1], 400, -32602)
    client.error(client.answer("greet", first, step)[1], 400, -32602)
    assert client.result(client.answer("two_steps", first, step, {"prefix": "a"})[1])["resultType"] == "input_required"


def test_expired_request_state_is_refused(client, monkeypatch):
    """A state older than the elicitation timeout is refused."""
    first = client.result(client.call_tool("greet")[1])
    import time as real_time

    from zemcp.eras.modern import request_state

    later = real_time.time() + 31
    monkeypatch.setattr(request_state.time, "time", lambda: later)
    client.error(
        client.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": "x"}}})[1], 400, -32602
    )


def test_another_key_cannot_open_the_state(client):
    """A server with another requestState key refuses the state (keys must be shared by every worker)."""
    first = client.result(client.call_tool("greet")[1])
    other_app, _ = make_app()
    other = inprocess_modern(other_app)
    other.error(
        other.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": "x"}}})[1], 400, -32602
    )


def test_rotated_keys_open_old_states():
    """A state sealed with the old key opens on a server whose key list is [new, old]."""
    old, new = "o" * 40, "n" * 40
    before = inprocess_modern(make_app(request_state_key=(old,))[0])
    first = before.result(before.call_tool("greet")[1])
    after = inprocess_modern(make_app(request_state_key=(new, old))[0])
    done = after.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": "R"}}})[1]
    assert after.result(done)["content"][0]["text"] == "Hello, R!"


def test_a_changed_question_breaks_the_replay_contract(client):
    """A handler that asks something else where an answer is recorded gets a clear error, never the old answer."""
    r1 = client.result(client.call_tool("fickle")[1])
    r2 = client.result(
        client.answer("fickle", r1, {"elicitation-1": {"action": "accept", "content": {"name": "a"}}})[1]
    )
    assert r2["resultType"] == "input_required"
    done = client.result(
        client.answer("fickle", r2, {"elicitation-2": {"action": "accept", "content": {"name": "b"}}})[1]
    )
    assert done["isError"] is True and "is not the question answered in an earlier round" in done["content"][0]["text"]


def test_a_handler_that_swallows_the_round_still_asks(client):
    """Catching BaseException around ctx.elicit does not turn the round into a result."""
    assert client.result(client.call_tool("swallow")[1])["resultType"] == "input_required"


def test_an_undeclared_capability_the_handler_needs_is_32021(client):
    """A tool that samples without the capability fails the request with -32021 requiredCapabilities."""
    error = client.error(client.call_tool("needs_sampling", capabilities={})[1], 400, -32021)
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    r1 = client.result(client.call_tool("needs_sampling")[1])
    assert r1["inputRequests"]["sampling-1"]["params"]["maxTokens"] == 10


def test_a_handler_that_adapts_to_missing_capabilities_completes(client):
    """A handler that catches ElicitUnsupported and falls back returns its result, not -32021."""
    assert (
        client.result(client.call_tool("adapts", capabilities={})[1])["content"][0]["text"]
        == "no elicitation: fallback"
    )


def test_a_prompt_can_elicit_by_multi_round_trip(client):
    """prompts/get of a prompt that takes ctx asks, then completes on retry."""
    params = {"name": "with_context"}
    r1 = client.result(client.request("prompts/get", params))
    assert r1["resultType"] == "input_required" and "user_context" in r1["inputRequests"]
    done = client.result(
        client.request(
            "prompts/get",
            {
                **params,
                "requestState": r1["requestState"],
                "inputResponses": {"user_context": {"action": "accept", "content": {"context": "test context"}}},
            },
        )
    )
    assert done["messages"][0]["content"]["text"] == "Prompt with context: test context"


def test_a_resource_read_can_elicit(client):
    """resources/read of a resource that takes ctx asks, then completes with caching hints."""
    r1 = client.result(client.request("resources/read", {"uri": "test://asked"}))
    assert r1["resultType"] == "input_required"
    done = client.result(
        client.request(
            "resources/read",
            {
                "uri": "test://asked",
                "requestState": r1["requestState"],
                "inputResponses": {"variant": {"action": "accept", "content": {"v": "x"}}},
            },
        )
    )
    assert done["contents"][0]["text"] == "variant x" and done["ttlMs"] == 0


def test_lists_never_require_input(client):
    """tools/list and prompts/list are never input_required (MRTR is for calls, prompts and reads only)."""
    for method in ("tools/list", "prompts/list"):
        assert client.result(client.request(method))["resultType"] == "complete"


# -- logging, progress -----------------------------------------------------------------------


def test_no_log_messages_without_log_level(client):
    """Without logLevel the request gets no notifications/message (and no stream for them)."""
    r = client.call_tool("chatty")[1]
    assert r.mimetype == "application/json" and client.result(r)["content"][0]["text"] == "done"


def test_log_level_and_progress_ride_the_request_stream(client):
    """logLevel info sends info (not debug) logs; a progressToken gets progress; the result comes last."""
    r = client.call_tool("chatty", meta={"io.modelcontextprotocol/logLevel": "info", "progressToken": "p-1"})[1]
    assert r.mimetype == "text/event-stream"
    frames = sse_messages(r.get_data(as_text=True))
    methods = [f.get("method") for f in frames]
    assert methods == [
        "notifications/message",
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert frames[0]["params"] == {"level": "info", "data": "working"}
    assert [f["params"]["progressToken"] for f in frames[1:4]] == ["p-1"] * 3
    assert frames[-1]["result"]["resultType"] == "complete"
    assert not any("id" in f and "method" in f for f in frames), "no server-to-client requests on the stream"


# -- subscriptions/listen ---------------------------------------------------------------------


def listen(client: ModernClient, notifications: dict) -> SseStream:
    """Open a subscriptions/listen stream asking for ``notifications``."""
    r, stream = client.open_stream(client.message("subscriptions/listen", {"notifications": notifications}))
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    return stream


def test_listen_acknowledges_then_delivers_only_what_was_asked(fixture):
    """The ack comes first with the honoured filter and subscriptionId; only asked-for notifications follow."""
    client, server = fixture
    stream = listen(client, {"toolsListChanged": True, "resourceSubscriptions": ["test://plain"], "bogus": True})
    try:
        ack = stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["test://plain"]}
        subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
        assert subscription
        assert server.notify_list_changed("prompts") == 0
        assert server.notify_list_changed("tools") == 1
        assert server.notify_resource_updated("test://plain") == 1
        tools, updated = stream.next_message(), stream.next_message()
        assert tools["method"] == "notifications/tools/list_changed"
        assert updated == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "test://plain", "_meta": {"io.modelcontextprotocol/subscriptionId": subscription}},
        }
    finally:
        stream.close()
    assert server.subscriptions.count() == 0


def test_registering_a_tool_announces_the_change(fixture):
    """A tool registered at run time sends tools/list_changed to listening clients."""
    client, server = fixture
    stream = listen(client, {"toolsListChanged": True})
    try:
        stream.next_message()

        @server.tool
        def late() -> str:
            return "late"

        assert stream.next_message()["method"] == "notifications/tools/list_changed"
    finally:
        stream.close()


def test_listen_streams_are_capped():
    """Beyond max_listen_streams a listen request is 429 with Retry-After; closing one frees a slot."""
    app, server = make_app(max_listen_streams=1)
    client = inprocess_modern(app)
    first = listen(client, {"toolsListChanged": True})
    first.next_message()
    refused = client.request("subscriptions/listen", {"notifications": {}})
    assert (
        refused.status_code == 429 and refused.headers["Retry-After"] and refused.get_json()["error"]["code"] == -32600
    )
    first.close()
    again = listen(client, {})
    again.next_message()
    again.close()


def test_shutdown_ends_listen_streams_with_a_result(fixture):
    """A server-side end answers the listen request with a complete result tagged with the subscription."""
    client, server = fixture
    stream = listen(client, {"promptsListChanged": True})
    stream.next_message()
    server.shutdown()
    end = stream.next_message()
    assert (
        end["result"]["resultType"] == "complete" and end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
    )
    stream.close()


def test_bad_listen_filter_is_invalid_params(client):
    """A filter flag that is not a boolean is -32602."""
    client.error(client.request("subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}}), 400, -32602)


# -- the same handler in the handshake era -------------------------------------------------------


def test_the_same_ask_all_handler_pushes_all_questions_in_the_handshake_era():
    """In a session, ask_all sends every request on the stream before waiting; the answers complete the call."""
    # 16 threads: a session may hold 3 pending questions at once (half the pending budget).
    app, _ = make_app(threads=16)
    peer = inprocess_session(app, name="h", version="1", protocol_version=LATEST_VERSION, capabilities=ALL_CAPABILITIES)
    _, _, stream = peer.open_call("all_at_once", {})
    frames = [stream.next_message() for _ in range(3)]
    assert [f["method"] for f in frames] == ["elicitation/create", "sampling/createMessage", "roots/list"]
    answers = [
        {"action": "accept", "content": {"name": "H"}},
        {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"},
        {"roots": []},
    ]
    for frame, answer in zip(frames, answers):
        assert peer.answer(frame["id"], answer).status_code == 202
    final = stream.rest()[-1]
    assert final["result"]["content"][0]["text"] == "H; yo; 0 root(s)" and "resultType" not in final["result"]
    stream.close()


def test_concurrent_rounds_do_not_mix():
    """Many callers in parallel each get their own answer back."""
    # Room for all 20 at once: the rounds, not the call budget or one address's share of it, are under test.
    client = inprocess_modern(make_app(threads=32, client_share=1)[0])
    results: dict[int, str] = {}

    def one(n: int) -> None:
        first = client.result(client.call_tool("greet")[1])
        done = client.result(
            client.answer("greet", first, {"user_name": {"action": "accept", "content": {"name": f"n{n}"}}})[1]
        )
        results[n] = done["content"][0]["text"]

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {n: f"Hello, n{n}!" for n in range(20)}


def test_caching_hints_follow_the_registrations():
    """tools/list carries the most cautious tool hint, resources/read the resource's, input_required none."""
    server = zemcp.Server("cache", settings=Settings(threads=4))

    @server.tool(ttl_ms=300000, cache_scope="public")
    def stable() -> str:
        return "s"

    @server.tool(ttl_ms=60000, cache_scope="public")
    def shorter() -> str:
        return "t"

    @server.resource("test://doc", ttl_ms=5000, cache_scope="public")
    def doc() -> str:
        return "doc"

    @server.resource("test://ask", name="ask")
    def ask(ctx: zemcp.Context) -> str:
        return ctx.elicit("?", NAME, key="k")["name"]

    client = inprocess_modern(zemcp.McpApp(server))
    listed = client.result(client.request("tools/list"))
    assert (listed["ttlMs"], listed["cacheScope"]) == (60000, "public")
    read = client.result(client.request("resources/read", {"uri": "test://doc"}))
    assert (read["ttlMs"], read["cacheScope"]) == (5000, "public")
    asked = client.result(client.request("resources/read", {"uri": "test://ask"}))
    assert asked["resultType"] == "input_required" and "ttlMs" not in asked and "cacheScope" not in asked


def test_a_handler_raising_resource_not_found_gets_the_modern_code():
    """A resource handler that takes ctx and raises ResourceNotFound is -32602 with data.uri, not -32002."""
    from zemcp.core.resources import ResourceNotFound

    server = zemcp.Server("nf", settings=Settings(threads=4))

    @server.resource("reports://{quarter}", name="report")
    def report(quarter: str, ctx: zemcp.Context) -> str:
        raise ResourceNotFound(f"reports://{quarter}")

    client = inprocess_modern(zemcp.McpApp(server))
    error = client.error(client.request("resources/read", {"uri": "reports://q9"}), 400, -32602)
    assert error["data"] == {"uri": "reports://q9"}


def test_listen_turned_off_is_method_not_found():
    """With max_listen_streams=0 subscriptions/listen is 404 -32601 and discover declares no listChanged."""
    client = inprocess_modern(make_app(max_listen_streams=0)[0])
    client.error(client.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}), 404, -32601)
    assert client.result(client.request("server/discover"))["capabilities"]["tools"] == {"listChanged": False}


def test_a_question_that_changes_between_rounds_is_reported_not_asked_forever(client):
    """An answer to a question whose text changed since it was asked ends the call with a replay error."""
    r1 = client.result(client.call_tool("clock")[1])
    done = client.result(client.answer("clock", r1, {"q": {"action": "accept", "content": {"name": "a"}}})[1])
    assert done["isError"] is True and "asked in the previous round under this key" in done["content"][0]["text"]


def test_a_key_asked_again_needs_a_new_answer(client):
    """The same key asked again later in the run is a new question: one answer is not used twice."""
    r1 = client.result(client.call_tool("until_valid")[1])
    r2 = client.result(client.answer("until_valid", r1, {"name": {"action": "accept", "content": {"name": "no"}}})[1])
    assert r2["resultType"] == "input_required" and list(r2["inputRequests"]) == ["name"]
    done = client.result(
        client.answer("until_valid", r2, {"name": {"action": "accept", "content": {"name": "yes"}}})[1]
    )
    assert done["content"][0]["text"] == "yes after 2"


def test_only_action_and_content_of_an_elicitation_answer_are_kept(client):
    """Fields a client adds to an ElicitResult do not travel in the requestState."""
    r1 = client.result(client.call_tool("two_steps")[1])
    padded = {"step1": {"action": "accept", "content": {"name": "A"}, "pad": "x" * 50_000}}
    r2 = client.result(client.answer("two_steps", r1, padded)[1])
    assert len(r2["requestState"]) < 2_000


def test_answers_too_large_for_a_request_state_are_a_clear_error(client):
    """Answers that cannot fit in a requestState are -32602 saying so, not an internal error."""
    r1 = client.result(client.call_tool("two_steps")[1])
    huge = {"step1": {"action": "accept", "content": {"name": "x" * 300_000}}}
    error = client.error(client.answer("two_steps", r1, huge)[1], 400, -32602)
    assert "more than the limit" in error["message"]


def test_a_question_key_must_be_a_string(fixture):
    """ctx.elicit(key=5) is a TypeError in the handler (an isError result), in every era."""
    client, server = fixture

    @server.tool
    def bad_key(ctx: zemcp.Context) -> str:
        return ctx.elicit("?", NAME, key=5)["name"]

    done = client.result(client.call_tool("bad_key")[1])
    assert done["isError"] is True and "key must be a non-empty string" in done["content"][0]["text"]
