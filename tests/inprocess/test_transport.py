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
from tests.support.threaded import Client
from zemcp import Settings

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "inproc", "version": "9"}}


class Peer:
    """One client session over a werkzeug test client."""

    def __init__(self, app, elicit=True, path="/mcp"):
        self.client = Client(app)
        self.path = path
        self.ids = iter(range(1, 10_000))
        caps = {"elicitation": {}} if elicit else {}
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {**INIT, "capabilities": caps}})
        assert r.status_code == 200, r.get_data()
        self.sid = r.headers["Mcp-Session-Id"]

    def post(self, message, **kw):
        headers = dict(HEADERS)
        if getattr(self, "sid", None):
            headers["Mcp-Session-Id"] = self.sid
        return self.client.post(self.path, data=json.dumps(message), headers=headers, **kw)

    def call(self, name, arguments, **kw):
        rid = next(self.ids)
        return rid, self.post(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
            **kw,
        )

    def answer(self, id_, result):
        # Another client object: the stream holds the first one's response open.
        other = Client(self.client.application)
        headers = {**HEADERS, "Mcp-Session-Id": self.sid}
        return other.post(self.path, data=json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}), headers=headers)


def events(response):
    """Yield parsed SSE events (dicts) and 'keep-alive' markers from a streamed response
    (a priming event and a lone ``retry`` field carry no message and are skipped)."""
    for chunk in response.response:
        for block in chunk.decode().split("\n\n"):
            if block.startswith(":"):
                yield "keep-alive"
            elif block:
                data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
                if data:
                    yield json.loads("\n".join(data))


@pytest.fixture
def app():
    return wsgi.create_app(Settings(keepalive_interval=0.05, elicitation_timeout=5, threads=8))


def test_plain_call_is_json(app):
    """A handler that never elicits answers application/json with its result."""
    peer = Peer(app)
    rid, r = peer.call("ze_execute", {"command": "session show"})
    assert r.status_code == 200 and r.mimetype == "application/json"
    body = r.get_json()
    assert body["id"] == rid and body["result"]["isError"] is False
    assert "client: inproc 9" in body["result"]["content"][0]["text"]


def test_elicitation_round_trip(app):
    """elicitation/create is the first event, the answer POST gets 202, the result is the last event."""
    peer = Peer(app)
    rid, r = peer.call("ze_execute", {}, buffered=False)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    assert r.headers["Cache-Control"] == "no-cache" and r.headers["X-Accel-Buffering"] == "no"
    stream = events(r)
    ask = next(stream)
    assert ask["method"] == "elicitation/create" and isinstance(ask["id"], str)
    assert ask["params"]["message"] == "Which command would you like to run?"
    assert ask["params"]["requestedSchema"]["required"] == ["command"]
    reply = peer.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
    assert reply.status_code == 202 and reply.get_data() == b""
    final = [e for e in stream if e != "keep-alive"]
    assert len(final) == 1 and final[0]["id"] == rid
    assert "elicitation: yes" in final[0]["result"]["content"][0]["text"]


def test_keepalive_comments_while_waiting(app):
    """The stream carries SSE comments while the handler waits for the answer."""
    peer = Peer(app)
    _, r = peer.call("ze_execute", {}, buffered=False)
    stream = events(r)
    ask = next(stream)
    assert next(stream) == "keep-alive"
    peer.answer(ask["id"], {"action": "decline"})
    final = [e for e in stream if e != "keep-alive"]
    assert final[-1]["result"]["isError"] is True
    assert final[-1]["result"]["content"][0]["text"].startswith("Error: elicit: the user declined")


def test_a_disconnect_waits_for_the_client_to_resume(app):
    """Closing the response (client gone) keeps the elicitation waiting; a GET with Last-Event-ID
    resumes the stream, replays the question and carries the result (werkzeug, no gunicorn)."""
    peer = Peer(app)
    rid, r = peer.call("ze_execute", {}, buffered=False)
    chunks = iter(r.response)
    priming = next(chunks).decode()
    assert priming.startswith("id: ") and "\nretry: 1000\n" in priming, priming
    ask = json.loads(next(chunks).decode().split("data: ", 1)[1])
    server = app.server
    r.close()
    time.sleep(0.2)
    assert server.pending.count() == 1, "a disconnect must not end the wait"
    first_id = priming.split("\n")[0][4:]
    resumed = Client(app).get(
        "/mcp",
        headers={"Accept": "text/event-stream", "Mcp-Session-Id": peer.sid, "Last-Event-ID": first_id},
        buffered=False,
    )
    assert resumed.status_code == 200 and resumed.mimetype == "text/event-stream"
    stream = events(resumed)
    assert next(e for e in stream if e != "keep-alive")["id"] == ask["id"]
    assert peer.answer(ask["id"], {"action": "accept", "content": {"command": "help"}}).status_code == 202
    final = next(e for e in stream if e != "keep-alive")
    assert final["id"] == rid and final["result"]["isError"] is False


def test_a_disconnect_past_the_resume_window_ends_the_wait():
    """Nobody resumes within ZEMCP_RESUME_WINDOW: the pending elicitation ends as a disconnect."""
    app = wsgi.create_app(
        Settings(keepalive_interval=0.05, elicitation_timeout=30, threads=8, resume_window=0.5, stream_retry=0.1)
    )
    peer = Peer(app)
    _, r = peer.call("ze_execute", {}, buffered=False)
    next(events(r))
    server = app.server
    assert server.pending.count() == 1
    r.close()
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
    peer = Peer(app)
    rid, r = peer.call("polled", {})
    body = r.get_data(as_text=True)
    assert r.mimetype == "text/event-stream"
    blocks = [b for b in body.split("\n\n") if b]
    assert blocks[0].startswith("id: ") and blocks[-1] == "retry: 1000", blocks
    assert "after the close" not in body
    last = blocks[0].split("\n")[0][4:]
    resumed = Client(app).get(
        "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": peer.sid, "Last-Event-ID": last}
    )
    final = [e for e in events(resumed) if e != "keep-alive"]
    assert final[-1]["id"] == rid and final[-1]["result"]["content"][0]["text"] == "after the close"


def test_cancelled_request_gets_no_response(app):
    """notifications/cancelled for the tools/call ends its stream without a response for its id."""
    peer = Peer(app)
    rid, r = peer.call("ze_execute", {}, buffered=False)
    stream = events(r)
    ask = next(stream)
    other = Client(app)
    resp = other.post(
        "/mcp",
        headers={**HEADERS, "Mcp-Session-Id": peer.sid},
        data=json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "user"}}
        ),
    )
    assert resp.status_code == 202
    rest = [e for e in stream if e != "keep-alive"]
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
    peer = Peer(app)
    _, r = peer.call("ze_execute", {}, buffered=False)
    stream = events(r)
    next(stream)
    deleted = Client(app).delete("/mcp", headers={"Mcp-Session-Id": peer.sid})
    assert deleted.status_code == 204
    final = [e for e in stream if e != "keep-alive" and "result" in e]
    assert "the session ended (deleted by the client)" in final[0]["result"]["content"][0]["text"]
    assert peer.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).status_code == 404


def test_other_session_cannot_answer(app):
    """An answer posted under another session's id resolves nothing (400, as for an id that
    waits nowhere); the owner's answer does."""
    owner, intruder = Peer(app), Peer(app)
    _, r = owner.call("ze_execute", {}, buffered=False)
    stream = events(r)
    ask = next(stream)
    refused = intruder.answer(ask["id"], {"action": "accept", "content": {"command": "server status"}})
    assert refused.status_code == 400 and "no request of this session is waiting" in refused.get_data(as_text=True)
    assert app.server.pending.count(owner.sid) == 1
    owner.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
    final = [e for e in stream if e != "keep-alive"]
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
    peer = Peer(zemcp.McpApp(make_server()))
    tools = peer.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).get_json()["result"]["tools"]
    assert [t["name"] for t in tools] == ["double", "fails", "refuses", "who"]
    assert tools[0]["description"] == "Double a number."
    assert peer.call("double", {"n": 4})[1].get_json()["result"]["content"][0]["text"] == "8"
    failed = peer.call("fails", {})[1].get_json()["result"]
    assert failed == {"content": [{"type": "text", "text": "disk on fire"}], "isError": True}
    assert peer.call("refuses", {})[1].get_json()["result"]["content"][0]["text"] == "not today"
    rid, r = peer.call("who", {})
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
    peer = Peer(zemcp.McpApp(make_server()))
    body = peer.post({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}).get_json()
    assert body["id"] == 5 and body["error"]["code"] == -32602 and text in body["error"]["message"]


def test_mounted_under_a_prefix():
    """Mounted with DispatcherMiddleware and endpoint '/', the prefix itself is the MCP endpoint."""
    host = DispatcherMiddleware(Response("host app"), {"/tools/mcp": zemcp.McpApp(make_server(), endpoint="/")})
    peer = Peer(host, path="/tools/mcp")
    assert peer.call("double", {"n": 1})[1].get_json()["result"]["content"][0]["text"] == "2"
    assert Client(host).get("/").get_data() == b"host app"


def test_pending_cap_per_session_refuses_at_once():
    """With a per-session cap of 1, a second eliciting call fails at once with too many pending."""
    app = wsgi.create_app(Settings(max_pending_per_session=1, threads=8, keepalive_interval=0.05))
    peer = Peer(app)
    _, first = peer.call("ze_execute", {}, buffered=False)
    ask = next(events(first))
    _, second = peer.call("ze_execute", {})
    text = second.get_json()["result"]["content"][0]["text"]
    assert text.startswith("Error: elicit: too many pending elicitations: this session already has 1")
    peer.answer(ask["id"], {"action": "cancel"})
    first.close()


def test_concurrent_sessions_each_get_their_answer():
    """Eight sessions eliciting at once each receive their own answer."""
    app = wsgi.create_app(Settings(threads=32, keepalive_interval=0.05))
    results = {}

    def one(i):
        peer = Peer(app)
        _, r = peer.call("ze_execute", {}, buffered=False)
        stream = events(r)
        ask = next(stream)
        peer.answer(ask["id"], {"action": "accept", "content": {"command": "session show"}})
        final = [e for e in stream if e != "keep-alive"][-1]
        results[i] = (peer.sid, final["result"]["content"][0]["text"])

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
    peer = Peer(app)
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

    peer = Peer(zemcp.McpApp(server))
    rid, r = peer.call("when", {})
    body = r.get_json()
    assert r.status_code == 200 and body["id"] == rid and body["error"]["code"] == -32603
    assert "not valid JSON" in body["error"]["message"]
    rid, r = peer.call("nan", {}, buffered=False)
    got = [e for e in events(r) if e != "keep-alive"]
    assert got[0]["method"] == "notifications/message"
    assert got[-1]["id"] == rid and got[-1]["error"]["code"] == -32603
    logged = peer.call("bad_log", {})[1].get_json()["result"]
    assert logged["isError"] and "not JSON compliant" in logged["content"][0]["text"]


def test_client_strings_with_lone_surrogates_are_echoed_safely(app):
    """A client name with a lone surrogate is stored and shown without breaking any response."""
    client = Client(app)
    r = client.post(
        "/mcp",
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
    listing = client.post(
        "/mcp",
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
    peer = Peer(app)
    r = peer.client.post(
        "/mcp",
        data=json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        headers=[*HEADERS.items(), ("Mcp-Session-Id", peer.sid), ("Mcp-Session-Id", peer.sid)],
    )
    assert r.status_code == 400 and "send the Mcp-Session-Id header once" in r.get_json()["error"]["message"]


def test_unexpected_argument_to_ze_execute_is_invalid_params(app):
    """ze_execute refuses arguments it does not define, naming them."""
    peer = Peer(app)
    body = peer.call("ze_execute", {"command": "help", "extra": 1})[1].get_json()
    assert body["error"]["code"] == -32602 and "extra" in body["error"]["message"]


def test_body_shorter_than_its_content_length_is_a_bad_request(app):
    """A body that ends before the bytes its Content-Length declares is refused with 400."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    r = Client(app).post(
        "/mcp", input_stream=io.BytesIO(body), headers={**HEADERS, "Content-Length": str(len(body) + 50)}
    )
    assert r.status_code == 400
    assert r.get_json()["error"]["code"] == -32600


def test_host_verdicts_stay_right_beyond_the_remembered_values(app):
    """Host verdicts are remembered for a bounded number of values; later values are still judged."""
    from zemcp.http.transport import VERDICT_CACHE_SIZE

    client = Client(app)
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    for n in range(VERDICT_CACHE_SIZE + 5):
        assert client.post("/mcp", data=ping, headers={**HEADERS, "Host": f"evil{n}.example"}).status_code == 403
    assert len(app._host_cache) == VERDICT_CACHE_SIZE
    for host in ("127.0.0.1:9", "localhost", "[::1]:8000", "evil0.example"):
        r = client.post("/mcp", data=ping, headers={**HEADERS, "Host": host})
        assert r.status_code == (403 if host.startswith("evil") else 400), (host, r.get_data())


def test_responses_to_an_allowed_page_can_be_read_by_it_streams_included(app):
    """Every response to an allowed Origin names it and exposes Mcp-Session-Id, the upgraded
    stream of an eliciting call too; a refused Origin gets 403 without CORS headers."""
    origin = "http://localhost:5173"
    client = Client(app)
    r = client.post(
        "/mcp",
        data=json.dumps(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {**INIT, "capabilities": {"elicitation": {}}}}
        ),
        headers={**HEADERS, "Origin": origin},
    )
    assert r.headers["Access-Control-Allow-Origin"] == origin and "Origin" in r.headers["Vary"]
    assert "Mcp-Session-Id" in r.headers["Access-Control-Expose-Headers"]
    sid = r.headers["Mcp-Session-Id"]
    stream = client.post(
        "/mcp",
        data=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}
        ),
        headers={**HEADERS, "Origin": origin, "Mcp-Session-Id": sid},
        buffered=False,
    )
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    assert stream.headers["Access-Control-Allow-Origin"] == origin
    stream.close()
    refused = client.options(
        "/mcp", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused.headers
    preflight = client.options(
        "/mcp",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type, X-Other, Mcp-Param-Region",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Headers"] == "content-type, mcp-param-region"
