"""The transport and server core driven in-process through werkzeug's test client.

Fast coverage of the WSGI layer, the in-place JSON to SSE upgrade and the tool API; the same
rules over real HTTP under gunicorn are in tests/integration.
"""

import io
import json
import threading
import time

import pytest
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wrappers import Response

import wsgi
import zemcp
from tests.support.clients import ACCEPT, HandshakeClient, handshake_session
from tests.support.wires import InProcessWire
from zemcp import Settings

HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
INIT = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "inproc", "version": "9"}}


def session(app, path="/mcp") -> HandshakeClient:
    """A 2025-06-18 session of client ``inproc 9`` with the elicitation capability."""
    return handshake_session(InProcessWire(app, path), name="inproc", version="9")


@pytest.fixture
def app():
    return wsgi.create_app(Settings(keepalive_interval=0.05, elicitation_timeout=5, threads=8))


def test_plain_call_is_json(app):
    """A handler that never elicits answers application/json with its result."""
    peer = session(app)
    rid, r = peer.call_tool("ze_execute", {"command": "session show"})
    assert r.status_code == 200 and r.mimetype == "application/json"
    body = r.get_json()
    assert body["id"] == rid and body["result"]["isError"] is False
    assert "client: inproc 9" in body["result"]["content"][0]["text"]


def test_elicitation_round_trip(app):
    """elicitation/create is the first event, the answer POST gets 202, the result is the last event."""
    peer = session(app)
    rid, r, stream = peer.open_call("ze_execute", {})
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    assert r.headers["Cache-Control"] == "no-cache" and r.headers["X-Accel-Buffering"] == "no"
    ask = stream.next_message()
    assert ask["method"] == "elicitation/create" and isinstance(ask["id"], str)
    assert ask["params"]["message"] == "Which command would you like to run?"
    assert ask["params"]["requestedSchema"]["required"] == ["command"]
    reply = peer.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
    assert reply.status_code == 202 and reply.get_data() == b""
    final = stream.rest()
    assert len(final) == 1 and final[0]["id"] == rid
    assert "elicitation: yes" in final[0]["result"]["content"][0]["text"]


def test_keepalive_comments_while_waiting(app):
    """The stream carries SSE comments while the handler waits for the answer."""
    peer = session(app)
    _, _, stream = peer.open_call("ze_execute", {})
    ask = stream.next_message()
    assert stream.next_item() == ("comment", "keep-alive")
    peer.answer(ask["id"], {"action": "decline"})
    final = stream.rest()
    assert final[-1]["result"]["isError"] is True
    assert final[-1]["result"]["content"][0]["text"].startswith("Error: elicit: the user declined")


def test_a_disconnect_waits_for_the_client_to_resume(app):
    """Closing the response (client gone) keeps the elicitation waiting; a GET with Last-Event-ID
    resumes the stream, replays the question and carries the result (werkzeug, no gunicorn)."""
    peer = session(app)
    rid, _, first = peer.open_call("ze_execute", {})
    first_id = first.read_priming()
    assert first.retry == 1000
    ask = first.next_message()
    server = app.server
    first.close()
    time.sleep(0.2)
    assert server.pending.count() == 1, "a disconnect must not end the wait"
    resumed, stream = peer.get_stream(first_id)
    assert resumed.status_code == 200 and resumed.mimetype == "text/event-stream"
    assert stream.next_message()["id"] == ask["id"]
    assert peer.answer(ask["id"], {"action": "accept", "content": {"command": "help"}}).status_code == 202
    final = stream.next_message()
    assert final["id"] == rid and final["result"]["isError"] is False


def test_a_disconnect_past_the_resume_window_ends_the_wait():
    """Nobody resumes within ZEMCP_RESUME_WINDOW: the pending elicitation ends as a disconnect."""
    app = wsgi.create_app(
        Settings(keepalive_interval=0.05, elicitation_timeout=30, threads=8, resume_window=0.5, stream_retry=0.1)
    )
    peer = session(app)
    _, _, stream = peer.open_call("ze_execute", {})
    stream.next_message()
    server = app.server
    assert server.pending.count() == 1
    stream.close()
    deadline = time.monotonic() + 5
    while server.pending.count() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.pending.count() == 0


def test_close_sse_stream_ends_the_response_and_the_handler_goes_on():
    """ctx.close_sse_stream() before anything was sent: the response is a stream of a priming
    event and a retry field only; the result waits for the GET that resumes it."""
    server = zemcp.Server("poll")

    @server.tool
    def polled(ctx: zemcp.Context) -> str:
        ctx.close_sse_stream()
        return "after the close"

    app = zemcp.McpApp(server)
    peer = session(app)
    rid, r = peer.call_tool("polled", {})
    body = r.get_data(as_text=True)
    assert r.mimetype == "text/event-stream"
    blocks = [b for b in body.split("\n\n") if b]
    assert blocks[0].startswith("id: ") and blocks[-1] == "retry: 1000", blocks
    assert "after the close" not in body
    last = blocks[0].split("\n")[0][4:]
    _, resumed = peer.get_stream(last)
    final = resumed.rest()
    assert final[-1]["id"] == rid and final[-1]["result"]["content"][0]["text"] == "after the close"


def test_cancelled_request_gets_no_response(app):
    """notifications/cancelled for the tools/call ends its stream without a response for its id."""
    peer = session(app)
    rid, _, stream = peer.open_call("ze_execute", {})
    ask = stream.next_message()
    resp = peer.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "user"}}
    )
    assert resp.status_code == 202
    rest = stream.rest()
    assert all(e.get("id") != rid for e in rest)
    assert rest == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ask["id"], "reason": "the client cancelled the request: user"},
        }
    ]
    assert app.server.pending.count() == 0


def test_delete_wakes_the_waiting_handler(app):
    """DELETE ends the session: 204, the waiting call ends with an error, later requests get 404."""
    peer = session(app)
    _, _, stream = peer.open_call("ze_execute", {})
    stream.next_message()
    deleted = peer.delete()
    assert deleted.status_code == 204
    final = [e for e in stream.rest() if "result" in e]
    assert "the session ended (deleted by the client)" in final[0]["result"]["content"][0]["text"]
    assert peer.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).status_code == 404


def test_other_session_cannot_answer(app):
    """An answer posted under another session's id resolves nothing (400, as for an id that
    waits nowhere); the owner's answer does."""
    owner, intruder = session(app), session(app)
    _, _, stream = owner.open_call("ze_execute", {})
    ask = stream.next_message()
    refused = intruder.answer(ask["id"], {"action": "accept", "content": {"command": "server status"}})
    assert refused.status_code == 400 and "no request of this session is waiting" in refused.get_data(as_text=True)
    assert app.server.pending.count(owner.session_id) == 1
    owner.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
    final = stream.rest()
    assert "client: inproc 9" in final[0]["result"]["content"][0]["text"]


def make_server():
    server = zemcp.Server("demo", "1.2.3", settings=Settings(threads=4))

    @server.tool(input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    def double(n):
        """Double a number.

        Longer text that is not part of the description.
        """
        return {"content": [{"type": "text", "text": str(2 * n)}]}

    @server.tool("fails", description="Always fails")
    def fails():
        raise RuntimeError("disk on fire")

    @server.tool("refuses", description="Refuses")
    def refuses():
        raise zemcp.ToolError("not today")

    @server.tool("who", description="Names the caller")
    def who(ctx: zemcp.Context):
        return {"client": ctx.session.client_info["name"], "request": ctx.request_id}

    return server


def test_tool_api_shapes_results_and_errors():
    """Descriptions come from docstrings; exceptions become isError results; ctx is injected."""
    peer = session(zemcp.McpApp(make_server()))
    tools = peer.list_tools()
    assert [t["name"] for t in tools] == ["double", "fails", "refuses", "who"]
    assert tools[0]["description"] == "Double a number."
    assert peer.call_tool("double", {"n": 4})[1].get_json()["result"]["content"][0]["text"] == "8"
    failed = peer.call_tool("fails", {})[1].get_json()["result"]
    assert failed == {"content": [{"type": "text", "text": "disk on fire"}], "isError": True}
    assert peer.call_tool("refuses", {})[1].get_json()["result"]["content"][0]["text"] == "not today"
    rid, r = peer.call_tool("who", {})
    assert json.loads(r.get_json()["result"]["content"][0]["text"]) == {"client": "inproc", "request": rid}


@pytest.mark.parametrize(
    "params, text",
    [
        ({"name": "nope"}, "Unknown tool: 'nope'"),
        ({"name": "double", "arguments": {"n": "x"}}, "argument 'n': 'x' is not of type 'integer'"),
        ({"name": "double", "arguments": {}}, "missing required argument 'n'"),
        ({"name": "double", "arguments": [1]}, "params.arguments must be an object"),
        ({}, "tools/call needs params.name"),
    ],
)
def test_bad_tool_calls_are_invalid_params(params, text):
    """Unknown tools and arguments that fail the input schema are -32602 errors naming the problem."""
    peer = session(zemcp.McpApp(make_server()))
    body = peer.post({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}).get_json()
    assert body["id"] == 5 and body["error"]["code"] == -32602 and text in body["error"]["message"]


def test_mounted_under_a_prefix():
    """Mounted with DispatcherMiddleware and endpoint '/', the prefix itself is the MCP endpoint."""
    host = DispatcherMiddleware(Response("host app"), {"/tools/mcp": zemcp.McpApp(make_server(), endpoint="/")})
    peer = session(host, path="/tools/mcp")
    assert peer.call_tool("double", {"n": 1})[1].get_json()["result"]["content"][0]["text"] == "2"
    assert peer.wire.raw("GET", "/").get_data() == b"host app"


def test_pending_cap_per_session_refuses_at_once():
    """With a per-session cap of 1, a second eliciting call fails at once with too many pending."""
    app = wsgi.create_app(Settings(max_pending_per_session=1, threads=8, keepalive_interval=0.05))
    peer = session(app)
    _, _, first = peer.open_call("ze_execute", {})
    ask = first.next_message()
    _, second = peer.call_tool("ze_execute", {})
    text = second.get_json()["result"]["content"][0]["text"]
    assert text.startswith("Error: elicit: too many pending elicitations: this session already has 1")
    peer.answer(ask["id"], {"action": "cancel"})
    first.close()


def test_concurrent_sessions_each_get_their_answer():
    """Eight sessions eliciting at once each receive their own answer."""
    app = wsgi.create_app(Settings(threads=32, keepalive_interval=0.05))
    results = {}

    def one(i):
        peer = session(app)
        _, _, stream = peer.open_call("ze_execute", {})
        ask = stream.next_message()
        peer.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
        final = stream.rest()[-1]
        results[i] = (peer.session_id, final["result"]["content"][0]["text"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(results) == 8
    assert all("elicitation: yes" in text for _, text in results.values())
    assert app.server.pending.count() == 0


@pytest.mark.parametrize("request_id", [[1], {"a": 1}, None, True, 1.5])
def test_cancel_with_an_unusable_request_id_is_ignored(app, request_id):
    """notifications/cancelled whose requestId is not a string or integer is accepted and ignored."""
    peer = session(app)
    r = peer.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
    assert r.status_code == 202
    assert peer.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).get_json()["result"] == {}


def test_result_json_cannot_carry_is_an_internal_error():
    """A tool result holding a value JSON cannot carry is answered with -32603, not a 500."""
    import datetime

    server = zemcp.Server("bad-results", "1", settings=Settings(threads=4, keepalive_interval=0.05))

    @server.tool("when", description="Returns a datetime in structuredContent")
    def when():
        return {
            "content": [{"type": "text", "text": "now"}],
            "structuredContent": {"at": datetime.datetime(2026, 1, 1)},
        }

    @server.tool("nan", description="Returns NaN after logging", input_schema={"type": "object"})
    def nan(ctx: zemcp.Context):
        ctx.log("error", "about to fail")
        return {"content": [{"type": "text", "text": "x"}], "structuredContent": {"v": float("nan")}}

    @server.tool("bad_log", description="Logs NaN", input_schema={"type": "object"})
    def bad_log(ctx: zemcp.Context):
        ctx.log("error", {"bad": float("nan")})

    peer = session(zemcp.McpApp(server))
    rid, r = peer.call_tool("when", {})
    body = r.get_json()
    assert r.status_code == 200 and body["id"] == rid and body["error"]["code"] == -32603
    assert "not valid JSON" in body["error"]["message"]
    rid, _, stream = peer.open_call("nan", {})
    got = stream.rest()
    assert got[0]["method"] == "notifications/message"
    assert got[-1]["id"] == rid and got[-1]["error"]["code"] == -32603
    logged = peer.call_tool("bad_log", {})[1].get_json()["result"]
    assert logged["isError"] and "not JSON compliant" in logged["content"][0]["text"]


def test_client_strings_with_lone_surrogates_are_echoed_safely(app):
    """A client name with a lone surrogate is stored and shown without breaking any response."""
    wire = InProcessWire(app)
    r = wire.raw(
        "POST",
        headers=HEADERS,
        data=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "\ud800",
                "method": "initialize",
                "params": {**INIT, "clientInfo": {"name": "\udc00", "version": "1"}},
            }
        ),
    )
    assert r.status_code == 200 and r.get_json()["id"] == "\ud800"
    sid = r.headers["Mcp-Session-Id"]
    listing = wire.raw(
        "POST",
        headers={**HEADERS, "Mcp-Session-Id": sid},
        data=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ze_execute", "arguments": {"command": "session list"}},
            }
        ),
    )
    assert listing.status_code == 200 and "\udc00" in listing.get_json()["result"]["content"][0]["text"]


def test_repeated_session_header_is_refused(app):
    """Mcp-Session-Id sent twice is a 400 that says to send it once."""
    peer = session(app)
    r = peer.wire.raw(
        "POST",
        data=json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        headers=[*HEADERS.items(), ("Mcp-Session-Id", peer.session_id), ("Mcp-Session-Id", peer.session_id)],
    )
    assert r.status_code == 400 and "send the Mcp-Session-Id header once" in r.get_json()["error"]["message"]


def test_unexpected_argument_to_ze_execute_is_invalid_params(app):
    """ze_execute refuses arguments it does not define, naming them."""
    peer = session(app)
    body = peer.call_tool("ze_execute", {"command": "help", "extra": 1})[1].get_json()
    assert body["error"]["code"] == -32602 and "extra" in body["error"]["message"]


def test_body_shorter_than_its_content_length_is_a_bad_request(app):
    """A body that ends before the bytes its Content-Length declares is refused with 400."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    r = InProcessWire(app).raw(
        "POST", input_stream=io.BytesIO(body), headers={**HEADERS, "Content-Length": str(len(body) + 50)}
    )
    assert r.status_code == 400
    assert r.get_json()["error"]["code"] == -32600


def test_host_verdicts_stay_right_beyond_the_remembered_values(app):
    """Host verdicts are remembered for a bounded number of values; later values are still judged."""
    from zemcp.http.transport import VERDICT_CACHE_SIZE

    wire = InProcessWire(app)
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    for n in range(VERDICT_CACHE_SIZE + 5):
        assert wire.raw("POST", data=ping, headers={**HEADERS, "Host": f"evil{n}.example"}).status_code == 403
    assert len(app._host_cache) == VERDICT_CACHE_SIZE
    for host in ("127.0.0.1:9", "localhost", "[::1]:8000", "evil0.example"):
        r = wire.raw("POST", data=ping, headers={**HEADERS, "Host": host})
        assert r.status_code == (403 if host.startswith("evil") else 400), (host, r.get_data())


def test_responses_to_an_allowed_page_can_be_read_by_it_streams_included(app):
    """Every response to an allowed Origin names it and exposes Mcp-Session-Id, the upgraded
    stream of an eliciting call too; a refused Origin gets 403 without CORS headers."""
    origin = "http://localhost:5173"
    wire = InProcessWire(app)
    r = wire.raw(
        "POST",
        data=json.dumps(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {**INIT, "capabilities": {"elicitation": {}}}}
        ),
        headers={**HEADERS, "Origin": origin},
    )
    assert r.headers["Access-Control-Allow-Origin"] == origin and "Origin" in r.headers["Vary"]
    assert "Mcp-Session-Id" in r.headers["Access-Control-Expose-Headers"]
    sid = r.headers["Mcp-Session-Id"]
    stream = wire.raw(
        "POST",
        data=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}
        ),
        headers={**HEADERS, "Origin": origin, "Mcp-Session-Id": sid},
        buffered=False,
    )
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    assert stream.headers["Access-Control-Allow-Origin"] == origin
    stream.close()
    refused = wire.raw("OPTIONS", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused.headers
    preflight = wire.raw(
        "OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type, X-Other, Mcp-Param-Region",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Headers"] == "content-type, mcp-param-region"
