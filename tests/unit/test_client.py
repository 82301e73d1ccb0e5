"""Unit tests of the ``zemcp-test mcp`` client: SSE parsing, directives, the answer queue,
and the request/stream handling against a fake HTTP adapter (no network)."""

from __future__ import annotations

import io
import json

import pytest
import requests
import urllib3
from click.testing import CliRunner
from requests.adapters import HTTPAdapter

from zemcp import __version__
from zemcp.testclient.client import McpTestClient
from zemcp.testclient.clienterrors import CommandError, DirectiveError, RpcError, TransportError
from zemcp.testclient.directives import AnswerQueue, CallTool, QueueAnswer, Wait, parse_directive, parse_duration
from zemcp.testclient.mcptest import main
from zemcp.testclient.sse import SseEvent, SseParser

# -- SSE parser ------------------------------------------------------------------------


def feed_all(chunks) -> list[SseEvent]:
    parser = SseParser()
    events = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_sse_line_endings(newline):
    body = newline.join(["event: message", 'data: {"a":1}', "", ""])
    assert feed_all([body]) == [SseEvent("message", '{"a":1}', "")]


def test_sse_multiline_data_joined_with_newline():
    assert feed_all(["data: one\ndata: two\ndata:\n\n"]) == [SseEvent("message", "one\ntwo\n", "")]


def test_sse_only_one_leading_space_removed():
    assert feed_all(["data:  two spaces\ndata:none\n\n"])[0].data == " two spaces\nnone"


def test_sse_comments_and_unknown_fields_ignored():
    events = feed_all([": keep-alive\n\n:another\nfoo: bar\ndata: x\n\n"])
    assert events == [SseEvent("message", "x", "")]


def test_sse_event_type_and_default():
    events = feed_all(["event: ping\ndata: 1\n\ndata: 2\n\n"])
    assert [(e.type, e.data) for e in events] == [("ping", "1"), ("message", "2")]


def test_sse_id_persists_and_nul_id_ignored():
    events = feed_all(["id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\nid\ndata: d\n\n"])
    assert [e.last_event_id for e in events] == ["7", "7", "7", ""]


def test_sse_retry_only_ascii_digits():
    parser = SseParser()
    parser.feed("retry: 1500\n\n")
    assert parser.retry == 1500
    parser.feed("retry: 15x\n\nretry: ١٢\n\n")
    assert parser.retry == 1500


def test_sse_field_without_colon_has_empty_value():
    assert feed_all(["data\ndata\n\n"]) == [SseEvent("message", "\n", "")]


def test_sse_no_dispatch_without_data():
    assert feed_all(["event: x\nid: 3\n\n"]) == []


def test_sse_empty_data_field_dispatches_empty_event():
    assert feed_all(["id: 1\ndata:\n\n"]) == [SseEvent("message", "", "1")]


def test_sse_event_waits_for_blank_line_and_partial_is_discarded():
    parser = SseParser()
    assert parser.feed("data: a\n") == []
    assert parser.feed("\ndata: unterminated\n") == [SseEvent("message", "a", "")]
    assert parser.feed(b"") == []


def test_sse_bom_skipped_at_start_only():
    assert feed_all([b"\xef\xbb\xbfdata: x\n\n"]) == [SseEvent("message", "x", "")]
    assert feed_all(["data: \ufeffx\n\n"])[0].data == "\ufeffx"


def test_sse_crlf_split_across_chunks_is_one_line_end():
    # The CR ends the line at once; the LF arriving next must not count as a blank line.
    events = feed_all([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert events == [SseEvent("message", "a\nb", "")]


def test_sse_byte_by_byte_with_multibyte_utf8():
    body = 'event: message\r\ndata: {"text": "h\u00e9llo \u2713"}\r\n\r\n: c\n\ndata: 2\n\n'.encode()
    one_by_one = feed_all(body[i : i + 1] for i in range(len(body)))
    assert one_by_one == feed_all([body])
    assert [json.loads(e.data) for e in one_by_one] == [{"text": "h\u00e9llo \u2713"}, 2]


def test_sse_invalid_utf8_replaced():
    assert feed_all([b"data: \xff\n\n"])[0].data == "\ufffd"


# -- directives ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("0", 0.0),
        ("250us", 0.00025),
        ("1h", 3600.0),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "2 s", "-1s", "2sec", "1s2"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("line", ["", "   ", "# a comment", "   # indented comment"])
def test_ignored_lines(line):
    assert parse_directive(line) is None


def test_elicit_directives():
    assert parse_directive('  elicit-accept {"command": "help"}  ') == QueueAnswer(
        {"action": "accept", "content": {"command": "help"}}
    )
    assert parse_directive("elicit-decline") == QueueAnswer({"action": "decline"})
    assert parse_directive("elicit-cancel") == QueueAnswer({"action": "cancel"})


@pytest.mark.parametrize(
    "line,message",
    [
        ("elicit-accept", "needs a JSON object"),
        ("elicit-accept [1, 2]", "got list"),
        ('elicit-accept "text"', "got str"),
        ("elicit-accept {broken", "invalid JSON"),
        ("elicit-decline now", "takes no argument"),
        ("elicit-cancel x", "takes no argument"),
        ("@", "needs a tool name"),
        ("@ze_execute [1]", "needs a JSON object"),
        ("wait", "not a duration"),
        ("wait soon", "not a duration"),
    ],
)
def test_directive_errors(line, message):
    with pytest.raises(DirectiveError, match=message) as info:
        parse_directive(line, 4)
    assert str(info.value).startswith("line 4: ")
    assert info.value.lineno == 4


def test_tool_call_directives():
    assert parse_directive('@ze_execute {"command": ""}') == CallTool("ze_execute", {"command": ""})
    assert parse_directive("@other_tool") == CallTool("other_tool", {})
    assert parse_directive("wait 500ms") == Wait(0.5)


def test_other_lines_run_through_ze_execute():
    assert parse_directive("  server status  ") == CallTool("ze_execute", {"command": "server status"})
    # Only the exact keywords are directives.
    assert parse_directive("elicit-accepted x") == CallTool("ze_execute", {"command": "elicit-accepted x"})
    assert parse_directive("waiting 2s") == CallTool("ze_execute", {"command": "waiting 2s"})


def test_answer_queue_is_fifo():
    queue = AnswerQueue()
    assert queue.pop() is None
    queue.push({"action": "decline"})
    queue.push({"action": "cancel"})
    assert len(queue) == 2
    assert queue.pop() == {"action": "decline"}
    assert queue.pop() == {"action": "cancel"}
    assert queue.pop() is None


# -- the client against a fake adapter -------------------------------------------------

URL = "http://127.0.0.1:9/mcp"


def sse(*messages, keepalive=True) -> bytes:
    out = b": keep-alive\n\n" if keepalive else b""
    for message in messages:
        out += b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"
    return out


def text_result(id_, *texts, is_error=False):
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "result": {"content": [{"type": "text", "text": t} for t in texts], "isError": is_error},
    }


class _Body(io.BytesIO):
    """A response body that reports itself closed once read to the end, like a socket's."""

    def isclosed(self) -> bool:
        return self.tell() >= len(self.getbuffer())


class FakeServer(HTTPAdapter):
    """Answers initialize, notifications, answers and DELETE like an MCP server; tools/call
    bodies come from ``calls`` (one ``(status, content_type, body)`` per call, in order)."""

    def __init__(self, calls=(), version="2025-06-18"):
        super().__init__()
        self.calls = list(calls)
        self.version = version
        self.log: list[tuple[str, dict, dict | None]] = []
        self.answer_status = 202

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        assert timeout is not None, "every request needs a timeout"
        message = json.loads(request.body) if request.body else None
        self.log.append((request.method, dict(request.headers), message))
        if request.method == "DELETE":
            status, ctype, body, extra = 204, None, b"", {}
        elif "method" not in message:
            status, ctype, body, extra = self.answer_status, None, b"", {}
        elif message["method"] == "initialize":
            result = {"protocolVersion": self.version, "capabilities": {}, "serverInfo": {"name": "fake"}}
            status, ctype, extra = 200, "application/json", {"Mcp-Session-Id": "sid-1"}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        elif "id" not in message:
            status, ctype, body, extra = 202, None, b"", {}
        else:
            status, ctype, body = self.calls.pop(0)
            extra = {}
        headers = dict(extra)
        if ctype:
            headers["Content-Type"] = ctype
        raw = urllib3.HTTPResponse(body=_Body(body), headers=headers, status=status, preload_content=False)
        return self.build_response(request, raw)

    def answers(self):
        return [m for method, _, m in self.log if method == "POST" and "method" not in m]


def make_client(server: FakeServer, **kwargs):
    session = requests.Session()
    session.mount("http://", server)
    out, err = io.StringIO(), io.StringIO()
    client = McpTestClient(URL, session=session, stdout=out, stderr=err, **kwargs)
    client.wait_ready = lambda: None  # no TCP probe in unit tests
    return client, out, err


ELICIT = {
    "jsonrpc": "2.0",
    "id": "e1",
    "method": "elicitation/create",
    "params": {"message": "Which command?", "requestedSchema": {"type": "object"}},
}


def test_initialize_then_headers_ids_and_delete():
    server = FakeServer([(200, "application/json", json.dumps(text_result(2, "ok")).encode())], version="2025-03-26")
    client, out, _ = make_client(server, protocol_version="2025-06-18", token="s3cret")
    client.run(["help"])
    assert out.getvalue() == "ok\n"
    (m1, h1, init), (m2, h2, note), (m3, h3, call), (m4, h4, _) = server.log
    assert init["id"] == 1 and init["method"] == "initialize"
    assert init["params"] == {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "zemcp-test", "version": __version__},
    }
    assert "Mcp-Session-Id" not in h1 and "MCP-Protocol-Version" not in h1
    assert note == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert call == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "ze_execute", "arguments": {"command": "help"}},
    }
    for headers in (h2, h3, h4):
        assert headers["Mcp-Session-Id"] == "sid-1"
        assert headers["MCP-Protocol-Version"] == "2025-03-26"
    assert all(h["Authorization"] == "Bearer s3cret" for h in (h1, h2, h3, h4))
    assert h1["Accept"] == "application/json, text/event-stream"
    assert m4 == "DELETE"


def test_elicit_flag_declares_capability():
    server = FakeServer()
    client, _, _ = make_client(server, elicit=True)
    client.initialize()
    assert server.log[0][2]["params"]["capabilities"] == {"elicitation": {}}


def test_elicitation_answered_from_queue_in_order():
    server = FakeServer(
        [
            (200, "text/event-stream", sse(ELICIT, text_result(2, "first"))),
            (200, "text/event-stream", sse(dict(ELICIT, id="e2"), text_result(3, "second"))),
        ]
    )
    client, out, err = make_client(server, elicit=True)
    client.run(['elicit-accept {"command": "a"}', "elicit-decline", '@ze_execute {"command": ""}', "@ze_execute"])
    assert server.answers() == [
        {"jsonrpc": "2.0", "id": "e1", "result": {"action": "accept", "content": {"command": "a"}}},
        {"jsonrpc": "2.0", "id": "e2", "result": {"action": "decline"}},
    ]
    assert out.getvalue() == "first\nsecond\n"
    assert "auto-cancel" not in err.getvalue()


def test_empty_queue_auto_cancels_and_says_so():
    server = FakeServer([(200, "text/event-stream", sse(ELICIT, text_result(2, "done")))])
    client, _, err = make_client(server, elicit=True)
    client.initialize()
    client.call_tool("ze_execute", {})
    assert server.answers() == [{"jsonrpc": "2.0", "id": "e1", "result": {"action": "cancel"}}]
    assert 'elicitation/create (id "e1")' in err.getvalue()
    assert "auto-cancel" in err.getvalue()


def test_notifications_go_to_stderr():
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 3, "total": 10, "message": "working"},
    }
    log = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": "srv", "data": "hi"},
    }
    cancelled = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "e9", "reason": "timeout"},
    }
    server = FakeServer([(200, "text/event-stream", sse(progress, log, cancelled, text_result(2, "out")))])
    client, out, err = make_client(server)
    client.initialize()
    client.call_tool("t", {})
    assert out.getvalue() == "out\n"
    assert err.getvalue().splitlines() == [
        "progress: 3/10 working",
        "log [info] srv: hi",
        'cancelled: the server cancelled its request "e9": timeout',
    ]


def test_multiple_text_items_and_non_text_items():
    result = {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ]
        },
    }
    server = FakeServer([(200, "application/json", json.dumps(result).encode())])
    client, out, err = make_client(server)
    client.initialize()
    client.call_tool("t", {})
    assert out.getvalue() == "a\nb\n"
    assert "1 non-text item" in err.getvalue()


def test_is_error_result_raises_command_error():
    server = FakeServer([(200, "application/json", json.dumps(text_result(2, "Error: nope", is_error=True)).encode())])
    client, out, _ = make_client(server)
    client.initialize()
    with pytest.raises(CommandError, match=r"^command error: Error: nope$"):
        client.call_tool("t", {})
    assert out.getvalue() == ""


def test_rpc_error_on_stream_and_json():
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool"}}
    server = FakeServer(
        [(200, "application/json", json.dumps(error).encode()), (200, "text/event-stream", sse(dict(error, id=3)))]
    )
    client, _, _ = make_client(server)
    client.initialize()
    for _ in range(2):
        with pytest.raises(RpcError, match=r"^RPC error -32602: Unknown tool$"):
            client.call_tool("t", {})


def test_stream_ended_without_response():
    server = FakeServer([(200, "text/event-stream", sse(text_result(99, "not mine")))])
    client, _, err = make_client(server)
    client.initialize()
    with pytest.raises(TransportError, match="ended without the response to id 2"):
        client.call_tool("t", {})
    assert "not for it" in err.getvalue()


def test_http_error_status_shows_rpc_message():
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}})
    server = FakeServer([(404, "application/json", body.encode())])
    client, _, _ = make_client(server)
    client.initialize()
    with pytest.raises(TransportError, match=r"tools/call \(id 2\) got HTTP 404: RPC error -32600: Session not found"):
        client.call_tool("t", {})


def test_unexpected_content_type():
    server = FakeServer([(200, "text/html", b"<html>")])
    client, _, _ = make_client(server)
    client.initialize()
    with pytest.raises(TransportError, match="Content-Type 'text/html'"):
        client.call_tool("t", {})


def test_elicitation_without_capability_is_a_protocol_violation():
    server = FakeServer([(200, "text/event-stream", sse(ELICIT, text_result(2, "x")))])
    client, _, _ = make_client(server, elicit=False)
    client.initialize()
    client.answers.push({"action": "accept", "content": {}})
    with pytest.raises(TransportError, match="protocol violation"):
        client.call_tool("t", {})
    assert server.answers() == []


def test_answer_not_accepted_is_an_error():
    server = FakeServer([(200, "text/event-stream", sse(ELICIT, text_result(2, "x")))])
    server.answer_status = 400
    client, _, _ = make_client(server, elicit=True)
    client.initialize()
    with pytest.raises(TransportError, match=r"got HTTP 400, expected 202"):
        client.call_tool("t", {})


def test_server_ping_and_unknown_requests_are_answered():
    ping = {"jsonrpc": "2.0", "id": "p1", "method": "ping"}
    other = {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}}
    server = FakeServer([(200, "text/event-stream", sse(ping, other, text_result(2, "x")))])
    client, _, _ = make_client(server)
    client.initialize()
    client.call_tool("t", {})
    pong, refusal = server.answers()
    assert pong == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert refusal["id"] == "s1" and refusal["error"]["code"] == -32601


def test_run_stops_at_first_error_and_still_deletes_the_session():
    server = FakeServer([(200, "application/json", json.dumps(text_result(2, "bad", is_error=True)).encode())])
    client, _, _ = make_client(server)
    with pytest.raises(CommandError):
        client.run(["first", "second"])
    methods = [(m, (msg or {}).get("method")) for m, _, msg in server.log]
    assert methods == [
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("POST", "tools/call"),
        ("DELETE", None),
    ]


def test_run_reports_directive_error_with_line_number():
    server = FakeServer()
    client, _, _ = make_client(server)
    with pytest.raises(DirectiveError, match=r"^line 2: elicit-accept needs a JSON object"):
        client.run(["# comment", "elicit-accept 5"])
    assert server.log[-1][0] == "DELETE"


def test_client_rejects_bad_url_and_timeout():
    with pytest.raises(ValueError, match="http"):
        McpTestClient("ftp://host/mcp")
    with pytest.raises(ValueError, match="positive"):
        McpTestClient(URL, timeout=0)


# -- the command line ------------------------------------------------------------------


def test_cli_url_and_port_are_exclusive():
    result = CliRunner().invoke(main, ["mcp", "--url", URL, "--port", "8000"], input="")
    assert result.exit_code == 2
    assert "either --url or --port" in result.output


def test_cli_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output
