"""The handler context over the transport: logging, progress, sampling, roots, URL elicitation.

Each test drives a small server through werkzeug's test client and reads the upgraded
``text/event-stream`` response, answering server-to-client requests from a second client.
"""

import json
import time

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, HandshakeClient, inprocess_session
from tests.support.wires import InProcessWire
from zemcp import Settings


@pytest.fixture
def app():
    server = zemcp.Server("ctx-demo", "1", settings=Settings(threads=8, keepalive_interval=0.05, elicitation_timeout=5))

    @server.tool("logs", description="Logs at three levels")
    def logs(ctx: zemcp.Context):
        for level in ("debug", "info", "error"):
            ctx.log(level, {"step": level}, logger="demo")
        return "logged"

    @server.tool("progress", description="Reports progress")
    def progress(ctx: zemcp.Context):
        for value in (0, 50, 100):
            ctx.report_progress(value, 100, f"at {value}")
        return "done"

    @server.tool("backwards", description="Reports progress that goes back")
    def backwards(ctx: zemcp.Context):
        ctx.report_progress(5)
        ctx.report_progress(4)

    @server.tool("sample", description="Samples the client's model")
    def sample(ctx: zemcp.Context):
        result = ctx.sample("Say hi", 20, systemPrompt="be brief")
        return result["content"]["text"]

    @server.tool("roots", description="Lists the client's roots")
    def roots(ctx: zemcp.Context):
        return ", ".join(r["uri"] for r in ctx.list_roots())

    @server.tool("login", description="Asks for a URL-mode interaction")
    def login(ctx: zemcp.Context):
        eid = ctx.elicit_url("Sign in at the provider", "https://auth.example.com/start")
        ctx.elicitation_complete(eid)
        return f"consented {eid}"

    @server.tool("needs_url", description="Needs a URL elicitation first")
    def needs_url():
        raise zemcp.URLElicitationRequired([("Connect your account", "https://auth.example.com/connect")])

    @server.tool("pick", description="Multi-select elicitation")
    def pick(ctx: zemcp.Context):
        answer = ctx.elicit(
            "Pick colours",
            {
                "type": "object",
                "properties": {
                    "colours": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["red", "green"]},
                        "default": ["red"],
                    },
                    "size": {
                        "type": "string",
                        "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
                    },
                },
            },
        )
        return json.dumps(answer, sort_keys=True)

    @server.tool(
        "typed",
        description="Needs an integer",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    def typed(n):
        return str(n)

    return zemcp.McpApp(server)


def test_initialize_advertises_logging_and_2025_11_25(app):
    """2025-11-25 is negotiated and the logging capability is advertised with tools."""
    client = HandshakeClient(InProcessWire(app), "x", "1")
    r = client.initialize(protocol_version=LATEST_VERSION, capabilities={}, initialized=False)
    result = r.get_json()["result"]
    assert result["protocolVersion"] == LATEST_VERSION
    assert result["capabilities"]["logging"] == {} and "tools" in result["capabilities"]


def test_log_messages_follow_the_level_and_ride_the_stream(app):
    """ctx.log sends notifications/message at or above the level set by logging/setLevel."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    assert (
        peer.post({"jsonrpc": "2.0", "id": 90, "method": "logging/setLevel", "params": {"level": "info"}}).get_json()[
            "result"
        ]
        == {}
    )
    rid, r, stream = peer.open_call("logs", {})
    assert r.headers["Content-Type"] == "text/event-stream"
    got = stream.rest()
    notes = [m["params"] for m in got if m.get("method") == "notifications/message"]
    assert notes == [
        {"level": "info", "data": {"step": "info"}, "logger": "demo"},
        {"level": "error", "data": {"step": "error"}, "logger": "demo"},
    ]
    assert got[-1]["id"] == rid and got[-1]["result"]["content"][0]["text"] == "logged"
    peer.post({"jsonrpc": "2.0", "id": 91, "method": "logging/setLevel", "params": {"level": "debug"}})
    _, r, stream = peer.open_call("logs", {})
    assert len([m for m in stream.rest() if m.get("method") == "notifications/message"]) == 3


def test_set_level_refuses_unknown_levels(app):
    """logging/setLevel with a level outside RFC 5424 is -32602."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    body = peer.post({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "loud"}}).get_json()
    assert body["error"]["code"] == -32602 and "debug, info" in body["error"]["message"]


def test_progress_needs_a_token_and_echoes_it(app):
    """Progress goes out only with a progressToken, echoing it, with increasing values."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    rid, r, stream = peer.open_call("progress", {}, meta={"progressToken": "tok-1"})
    got = stream.rest()
    assert [m["params"] for m in got[:-1]] == [
        {"progressToken": "tok-1", "progress": v, "total": 100, "message": f"at {v}"} for v in (0, 50, 100)
    ]
    _, plain, stream = peer.open_call("progress", {})
    assert plain.headers["Content-Type"] == "application/json"


def test_progress_that_goes_back_is_a_tool_error(app):
    """A handler reporting decreasing progress gets an isError result saying why."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    _, r, stream = peer.open_call("backwards", {}, meta={"progressToken": 7})
    final = stream.rest()[-1]["result"]
    assert final["isError"] and "progress must increase" in final["content"][0]["text"]


def test_sampling_round_trip(app):
    """ctx.sample sends sampling/createMessage and returns the client's result."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"sampling": {}})
    rid, r, stream = peer.open_call("sample", {})
    ask = stream.next_message()
    assert ask["method"] == "sampling/createMessage"
    assert ask["params"] == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
        "maxTokens": 20,
        "systemPrompt": "be brief",
    }
    assert (
        peer.answer(
            ask["id"], {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
        ).status_code
        == 202
    )
    assert stream.rest()[-1]["result"]["content"][0]["text"] == "hi"


def test_sampling_without_capability_sends_nothing(app):
    """Without the sampling capability ctx.sample fails at once and the answer stays JSON."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    _, r, _ = peer.open_call("sample", {})
    assert r.headers["Content-Type"] == "application/json"
    text = r.get_json()["result"]["content"][0]["text"]
    assert "did not declare the sampling capability" in text


def test_roots_error_answer_is_reported(app):
    """A JSON-RPC error answer to roots/list becomes an isError result naming the code."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"roots": {}})
    _, r, stream = peer.open_call("roots", {})
    ask = stream.next_message()
    assert ask["method"] == "roots/list"
    peer.answer(ask["id"], error={"code": -32601, "message": "no roots here"})
    text = stream.rest()[-1]["result"]["content"][0]["text"]
    assert "the client refused roots/list: error -32601: no roots here" in text


def test_roots_listed(app):
    """ctx.list_roots returns the client's roots."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"roots": {"listChanged": False}})
    _, r, stream = peer.open_call("roots", {})
    ask = stream.next_message()
    peer.answer(ask["id"], {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]})
    assert stream.rest()[-1]["result"]["content"][0]["text"] == "file:///a, file:///b"


def test_url_mode_elicitation_and_completion(app):
    """elicit_url sends mode url with an elicitationId, then notifications/elicitation/complete."""
    peer = inprocess_session(
        app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {"form": {}, "url": {}}}
    )
    _, r, stream = peer.open_call("login", {})
    ask = stream.next_message()
    params = ask["params"]
    assert params["mode"] == "url" and params["url"] == "https://auth.example.com/start" and params["elicitationId"]
    peer.answer(ask["id"], {"action": "accept"})
    rest = stream.rest()
    assert rest[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": params["elicitationId"]},
    }
    assert rest[-1]["result"]["content"][0]["text"] == f"consented {params['elicitationId']}"


@pytest.mark.parametrize("capabilities", [{"elicitation": {}}, {"elicitation": {"form": {}}}])
def test_url_mode_needs_the_url_capability(app, capabilities):
    """A client that declared form mode only is never sent a URL-mode request."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities=capabilities)
    _, r, _ = peer.open_call("login", {})
    assert r.headers["Content-Type"] == "application/json"
    assert "did not declare URL-mode elicitation" in r.get_json()["result"]["content"][0]["text"]


def test_url_elicitation_required_error(app):
    """URLElicitationRequired answers the call with -32042 listing the elicitations."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {"url": {}}})
    rid, r, _ = peer.open_call("needs_url", {})
    body = r.get_json()
    assert body["id"] == rid and body["error"]["code"] == -32042
    (item,) = body["error"]["data"]["elicitations"]
    assert item["mode"] == "url" and item["url"] == "https://auth.example.com/connect" and item["elicitationId"]


def test_form_mode_in_2025_11_25_allows_multi_select(app):
    """2025-11-25 sessions may use titled and multi-select enums; the request says mode form."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {}})
    _, r, stream = peer.open_call("pick", {})
    ask = stream.next_message()
    assert ask["params"]["mode"] == "form"
    peer.answer(ask["id"], {"action": "accept", "content": {"colours": ["green", "red"], "size": "l"}})
    assert stream.rest()[-1]["result"]["content"][0]["text"] == '{"colours": ["green", "red"], "size": "l"}'


def test_multi_select_is_refused_before_2025_11_25(app):
    """A 2025-06-18 session keeps the stricter subset: an array property is refused."""
    peer = inprocess_session(app)
    _, r = peer.call_tool("pick", {})
    text = r.get_json()["result"]["content"][0]["text"]
    assert text.startswith("requestedSchema is invalid at properties.")


def test_invalid_arguments_are_tool_errors_in_2025_11_25(app):
    """From 2025-11-25 arguments that fail the input schema give an isError result, not -32602."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    rid, r, _ = peer.open_call("typed", {"n": "x"})
    body = r.get_json()
    assert body["id"] == rid and body["result"]["isError"] is True
    assert "'x' is not of type 'integer'" in body["result"]["content"][0]["text"]
    _, old = inprocess_session(app).call_tool("typed", {"n": "x"})
    assert old.get_json()["error"]["code"] == -32602


def test_cancelled_call_stops_logging(app):
    """Once the call is cancelled, ctx.log raises the cancellation so the handler stops."""
    server = zemcp.Server("c", "1", settings=Settings(threads=4, keepalive_interval=0.05))
    seen = []

    @server.tool("slow", description="Logs until cancelled")
    def slow(ctx: zemcp.Context):
        try:
            for i in range(200):
                ctx.log("info", i)
                time.sleep(0.01)
        except zemcp.RequestCancelled:
            seen.append("cancelled")
            raise

    app = zemcp.McpApp(server)
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={})
    rid, r, stream = peer.open_call("slow", {})
    stream.next_message()
    peer.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    rest = stream.rest()
    assert all(m.get("id") != rid for m in rest)
    assert seen == ["cancelled"]


def test_url_elicitation_required_without_url_capability_is_a_tool_error(app):
    """A client that did not declare URL mode gets the links as an isError text, never -32042."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {"form": {}}})
    _, r, _ = peer.open_call("needs_url", {})
    result = r.get_json()["result"]
    assert result["isError"] and "https://auth.example.com/connect" in result["content"][0]["text"]


def test_form_elicitation_with_url_only_capability_says_so(app):
    """A client that declared URL mode only is told form mode is missing, not elicitation as a whole."""
    peer = inprocess_session(app, protocol_version=LATEST_VERSION, capabilities={"elicitation": {"url": {}}})
    _, r, _ = peer.open_call("pick", {})
    assert "declared elicitation without form mode" in r.get_json()["result"]["content"][0]["text"]


def test_unencodable_sampling_params_fail_at_once(app):
    """Params JSON cannot carry raise in the handler instead of waiting for an answer that cannot come."""
    server = zemcp.Server("s", "1", settings=Settings(threads=4, elicitation_timeout=30))

    @server.tool("bad_sample", description="Samples with a set in the metadata")
    def bad_sample(ctx: zemcp.Context):
        return ctx.sample("hi", 5, metadata={"tags": {1, 2}})

    peer = inprocess_session(zemcp.McpApp(server), protocol_version=LATEST_VERSION, capabilities={"sampling": {}})
    started = time.monotonic()
    _, r, _ = peer.open_call("bad_sample", {})
    assert r.get_json()["result"]["isError"] and time.monotonic() - started < 5
    assert server.pending.count() == 0
