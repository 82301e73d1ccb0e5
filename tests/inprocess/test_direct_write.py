"""The direct-write path in-process: handlers on the request's own thread, writing through
``DirectSink`` (zemcp/replies/direct.py), as under gunicorn's gthread workers.

zemcp writes directly when the WSGI environ carries the client's socket (``gunicorn.socket``)
and ``wsgi.multithread``; werkzeug's test client has no socket, so the other in-process tests
take the pool path (``ReplySink``). Here each connection is a ``socket.socketpair()``: the
server's end is served on a thread of its own the way gunicorn's gthread worker serves a
connection (gunicorn's request parser, its ``wsgi.create`` environ, its ``Response`` writing
HTTP/1.1), and the client's end is read with ``http.client`` and the project's SSE parser.
The same flows under a real gunicorn are in tests/integration.
"""

from __future__ import annotations

import errno
import http.client
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi as gunicorn_wsgi
from gunicorn.http.errors import NoMoreData
from gunicorn.http.parser import RequestParser

import zemcp
from tests.support.clients import ACCEPT, LATEST_VERSION, ModernClient
from zemcp import Settings
from zemcp.testclient.sse import SseParser

#: gunicorn's default settings: what its request parser and its Response read.
GUNICORN = Config()
#: The addresses gunicorn would report for the client and the listener (a socket pair has none).
CLIENT_ADDRESS = ("127.0.0.1", 50000)
LISTENER_ADDRESS = ("127.0.0.1", 8000)
#: [seconds] the longest a read, a wait for the server or the end of a serving thread may take.
TIMEOUT = 5.0
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# -- the wire: socket pairs served as gunicorn serves a connection --------------------------


class Reply:
    """One HTTP response read on the client's end of a socket pair: a JSON body, or an event
    stream read item by item.

    Attributes:
        status: the HTTP status.
        thread: the name of the thread that serves the connection (a direct handler runs on it).
        last_event_id: the id of the latest event read ("" before any).
    """

    def __init__(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse, thread: str):
        self._connection = connection
        self._response = response
        self._parser = SseParser()
        self.status = response.status
        self.thread = thread
        self.last_event_id = ""

    def header(self, name: str) -> str | None:
        """The value of the response header ``name``, or None."""
        return self._response.getheader(name)

    @property
    def retry(self) -> int | None:
        """[milliseconds] the stream's last ``retry`` field read, or None."""
        return self._parser.retry

    def body(self) -> bytes:
        """The whole body (the connection is closed after it)."""
        try:
            return self._response.read()
        finally:
            self.close()

    def json(self) -> Any:
        """The whole body as JSON (the connection is closed after it)."""
        assert self.header("Content-Type") == "application/json", self.header("Content-Type")
        return json.loads(self.body())

    def next_item(self) -> tuple[str, Any] | None:
        """The next ``("comment", text)`` or ``("event", data)`` of the stream; None at its end."""
        while line := self._response.readline():
            if line.startswith(b":"):
                return "comment", line[1:].strip().decode()
            # One line completes at most one event (at its blank line).
            events = self._parser.feed(line)
            if events:
                self.last_event_id = events[0].last_event_id
                return "event", events[0].data
        return None

    def next_message(self) -> dict[str, Any] | None:
        """The JSON-RPC message of the next event (comments and data-less priming events skipped); None at the end.

        Fails when only keep-alive comments came for :data:`TIMEOUT` seconds.
        """
        deadline = time.monotonic() + TIMEOUT
        while (item := self.next_item()) is not None:
            assert time.monotonic() < deadline, f"no message within {TIMEOUT:g} s, only comments"
            if item[0] == "event" and item[1]:
                message: dict[str, Any] = json.loads(item[1])
                return message
        return None

    def rest(self) -> list[dict[str, Any]]:
        """Every message until the server ends the stream."""
        messages = []
        while (message := self.next_message()) is not None:
            messages.append(message)
        return messages

    def close(self) -> None:
        """Close the client's end of the connection (the client goes away)."""
        self._response.close()
        self._connection.close()


class Wire:
    """Connections to one WSGI application, each over a socket pair whose server end is served
    on a thread of its own, as gunicorn's gthread worker serves a connection
    (``gunicorn/workers/gthread.py``, ``handle_request``): the environ carries the socket as
    ``gunicorn.socket`` and ``wsgi.multithread`` is true, so zemcp writes directly.

    Attributes:
        errors: what a serving thread raised other than a client that went away.
    """

    def __init__(self, app: Callable[..., Any]):
        self._app = app
        self._threads: list[threading.Thread] = []
        self._replies: list[Reply] = []
        self.errors: list[BaseException] = []

    def request(self, method: str, headers: dict[str, str], body: bytes | None = None) -> Reply:
        """Send one request on a new connection; returns its response once the head arrived."""
        ours, theirs = socket.socketpair()
        ours.settimeout(TIMEOUT)
        thread = threading.Thread(
            target=self._serve, args=(theirs,), name=f"direct-wire-{len(self._threads)}", daemon=True
        )
        thread.start()
        self._threads.append(thread)
        connection = http.client.HTTPConnection(LISTENER_ADDRESS[0], LISTENER_ADDRESS[1], timeout=TIMEOUT)
        connection.sock = ours
        connection.request(method, "/mcp", body=body, headers=headers)
        reply = Reply(connection, connection.getresponse(), thread.name)
        self._replies.append(reply)
        return reply

    def post(self, message: dict[str, Any], headers: dict[str, str]) -> Reply:
        """POST one JSON-RPC message with ``headers`` (besides the content type and Accept)."""
        sent = {"Content-Type": "application/json", "Accept": ACCEPT, **headers}
        return self.request("POST", sent, json.dumps(message).encode())

    def _serve(self, sock: socket.socket) -> None:
        try:
            for request in RequestParser(GUNICORN, sock, CLIENT_ADDRESS):
                response, environ = gunicorn_wsgi.create(request, sock, CLIENT_ADDRESS, LISTENER_ADDRESS, GUNICORN)
                environ["wsgi.multithread"] = True
                body = self._app(environ, response.start_response)
                try:
                    for chunk in body:
                        response.write(chunk)
                    response.close()
                finally:
                    if hasattr(body, "close"):
                        body.close()
                if response.should_close():
                    return
        except NoMoreData:
            pass  # the client closed the connection between requests
        except OSError as exc:
            # A client that went away, which gunicorn ignores too.
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.errors.append(exc)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            sock.close()

    def close(self) -> None:
        """Close every client end, then check that every serving thread ended without an error."""
        for reply in self._replies:
            reply.close()
        for thread in self._threads:
            thread.join(TIMEOUT)
        alive = [thread.name for thread in self._threads if thread.is_alive()]
        assert not alive, f"serving threads still running {TIMEOUT:g} s after their clients left: {alive}"
        assert not self.errors, self.errors


class Seen:
    """What the handlers saw: the thread each ran on and the abort each was woken with."""

    def __init__(self) -> None:
        self.threads: dict[str, str] = {}
        self.aborted: dict[str, BaseException] = {}

    def ran(self, tool: str) -> None:
        """Called by ``tool``'s handler: note the thread it runs on."""
        self.threads[tool] = threading.current_thread().name

    def wait_aborted(self, tool: str) -> BaseException:
        """The abort ``tool`` was woken with; fails when none came within :data:`TIMEOUT`."""
        deadline = time.monotonic() + TIMEOUT
        while tool not in self.aborted:
            assert time.monotonic() < deadline, f"{tool} was not aborted within {TIMEOUT:g} s"
            time.sleep(0.02)
        return self.aborted[tool]


def make_app(seen: Seen, **settings: Any) -> zemcp.McpApp:
    """The app of the tests, its handlers telling ``seen`` what they saw; ``settings`` over
    short keep-alives (0.2 s) and waits (10 s)."""
    server = zemcp.Server(
        "direct-write",
        "1.0",
        settings=Settings(**{"keepalive_interval": 0.2, "elicitation_timeout": 10, "threads": 8, **settings}),
    )

    @server.tool
    def plain(ctx: zemcp.Context) -> str:
        """Answers without sending anything first."""
        seen.ran("plain")
        return "plain answer"

    @server.tool
    def greet(ctx: zemcp.Context) -> str:
        """Asks for a name, then greets."""
        seen.ran("greet")
        try:
            answer = ctx.elicit("What is your name?", NAME, key="user_name")
        except zemcp.ElicitAborted as exc:
            seen.aborted["greet"] = exc
            raise
        return f"Hello, {answer['name']}!"

    @server.tool
    def chatty(ctx: zemcp.Context) -> str:
        """Logs and reports progress, then answers."""
        seen.ran("chatty")
        ctx.log("info", "working")
        ctx.report_progress(1, 2)
        ctx.report_progress(2, 2)
        return "done"

    @server.tool
    def counting(ctx: zemcp.Context) -> str:
        """Reports progress until its client goes away (for 10 s at most)."""
        seen.ran("counting")
        try:
            for step in range(1, 200):
                ctx.report_progress(step)
                time.sleep(0.05)
        except zemcp.ElicitAborted as exc:
            seen.aborted["counting"] = exc
            raise
        return "nobody noticed the client leave"

    @server.tool
    def polled(ctx: zemcp.Context) -> str:
        """Ends its connection on purpose (SSE polling), then answers."""
        seen.ran("polled")
        ctx.close_sse_stream()
        return "after the close"

    return zemcp.McpApp(server)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[zemcp.McpApp, Wire, Seen]]]:
    """``serve(**settings)``: an app, the wire to it and what its handlers saw; at teardown the
    server shuts down (waiting handlers wake) and every connection and serving thread ends."""
    started: list[tuple[zemcp.McpApp, Wire]] = []

    def start(**settings: Any) -> tuple[zemcp.McpApp, Wire, Seen]:
        seen = Seen()
        app = make_app(seen, **settings)
        wire = Wire(app)
        started.append((app, wire))
        return app, wire, seen

    yield start
    for app, wire in started:
        app.server.shutdown()
        wire.close()


class Session:
    """A handshake-era session over the wire (initialized, with the elicitation capability)."""

    def __init__(self, wire: Wire):
        self.wire = wire
        self.ids = itertools.count(1)
        init = wire.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_VERSION,
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "direct-write-tests", "version": "1"},
                },
            },
            {},
        )
        assert init.status == 200
        self.id = init.header("Mcp-Session-Id")
        assert self.id and init.json()["result"]["protocolVersion"] == LATEST_VERSION
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, read=True).status == 202

    def headers(self) -> dict[str, str]:
        """The headers of a request in the session."""
        assert self.id is not None
        return {"Mcp-Session-Id": self.id, "MCP-Protocol-Version": LATEST_VERSION}

    def post(self, message: dict[str, Any], *, read: bool = False) -> Reply:
        """POST ``message`` in the session; with ``read``, the (empty) body is read and the connection closed."""
        reply = self.wire.post(message, self.headers())
        if read:
            assert reply.body() == b""
        return reply

    def call(self, tool: str, meta: dict[str, Any] | None = None) -> tuple[int, Reply]:
        """Start a tools/call of ``tool``; returns its id and its response."""
        request_id = next(self.ids)
        params: dict[str, Any] = {"name": tool, "arguments": {}}
        if meta is not None:
            params["_meta"] = meta
        return request_id, self.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def answer(self, request_id: str, result: dict[str, Any]) -> int:
        """POST the answer to a server request (another connection, another thread); returns its status."""
        return self.post({"jsonrpc": "2.0", "id": request_id, "result": result}, read=True).status

    def resume(self, last_event_id: str) -> Reply:
        """GET the stream that ``last_event_id`` names, from after that event."""
        return self.wire.request(
            "GET", {"Accept": "text/event-stream", "Last-Event-ID": last_event_id, **self.headers()}
        )


def modern_call(
    wire: Wire, tool: str, meta: dict[str, Any] | None = None, **params: Any
) -> tuple[dict[str, Any], Reply]:
    """POST a 2026-07-28 tools/call of ``tool`` (the envelope and headers of the test client,
    whose own HTTP is not used; ``meta`` added to its ``_meta``); returns the message and its response."""
    client = ModernClient(f"http://{LISTENER_ADDRESS[0]}:{LISTENER_ADDRESS[1]}/mcp")
    message = client.message("tools/call", {"name": tool, "arguments": {}, **params})
    message["params"]["_meta"].update(meta or {})
    return message, wire.request("POST", client.headers(message), json.dumps(message).encode())


def assert_stream(reply: Reply) -> None:
    """``reply`` is an event stream as gunicorn writes one for the direct path."""
    assert reply.status == 200
    assert reply.header("Content-Type") == "text/event-stream"
    # Written as it goes, through PEP 3333's write: no length known in advance.
    assert reply.header("Transfer-Encoding") == "chunked" and reply.header("Content-Length") is None


# -- plain JSON ---------------------------------------------------------------------------


def test_a_plain_handshake_call_is_answered_json_from_the_request_thread(serve):
    """A handler that sends nothing first runs on the thread serving its request and is answered
    with one application/json body of known length."""
    app, wire, seen = serve()
    session = Session(wire)
    request_id, reply = session.call("plain")
    assert reply.status == 200 and reply.header("Content-Length") is not None
    body = reply.json()
    assert body["id"] == request_id and body["result"]["content"][0]["text"] == "plain answer"
    assert seen.threads["plain"] == reply.thread
    assert app.server.admission.running == 0


def test_a_plain_modern_call_is_answered_json_from_the_request_thread(serve):
    """The same in 2026-07-28: a complete result, no session."""
    app, wire, seen = serve()
    message, reply = modern_call(wire, "plain")
    assert reply.status == 200 and reply.header("Mcp-Session-Id") is None
    body = reply.json()
    assert body["id"] == message["id"] and body["result"]["resultType"] == "complete"
    assert body["result"]["content"][0]["text"] == "plain answer"
    assert seen.threads["plain"] == reply.thread
    assert app.server.admission.running == 0


# -- the in-place upgrade -------------------------------------------------------------------


def test_an_eliciting_call_becomes_a_stream_that_carries_the_question_and_the_result(serve):
    """Handshake era: the elicitation commits text/event-stream (a priming event first), the
    answer POSTed on another connection is taken (202), the result ends the same stream."""
    app, wire, seen = serve()
    session = Session(wire)
    request_id, reply = session.call("greet")
    assert_stream(reply)
    assert reply.header("Cache-Control") == "no-cache" and reply.header("X-Accel-Buffering") == "no"
    assert reply.next_item() == ("event", "")  # the priming event: an id and no data
    priming = reply.last_event_id
    ask = reply.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert ask["params"]["message"] == "What is your name?"
    assert reply.last_event_id != priming and reply.last_event_id.rsplit("-", 1)[0] == priming.rsplit("-", 1)[0]
    assert seen.threads["greet"] == reply.thread
    assert session.answer(ask["id"], {"action": "accept", "content": {"name": "Ada"}}) == 202
    final = reply.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    assert app.server.pending.count() == 0 and app.server.admission.running == 0


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_notifications_go_out_before_the_result(serve, era):
    """Log and progress notifications upgrade the response in place and precede the result."""
    _, wire, seen = serve()
    if era == "handshake":
        request_id, reply = Session(wire).call("chatty", {"progressToken": "p-1"})
    else:
        message, reply = modern_call(
            wire, "chatty", {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"}
        )
        request_id = message["id"]
    assert_stream(reply)
    messages = reply.rest()
    assert [m.get("method") for m in messages] == [
        "notifications/message",
        "notifications/progress",
        "notifications/progress",
        None,
    ], messages
    assert messages[0]["params"] == {"level": "info", "data": "working"}
    assert [m["params"]["progress"] for m in messages[1:3]] == [1, 2]
    assert messages[-1]["id"] == request_id and messages[-1]["result"]["content"][0]["text"] == "done"
    assert seen.threads["chatty"] == reply.thread


def test_a_waiting_stream_carries_keepalive_comments(serve):
    """While the handler waits for the answer, the stream carries keep-alive comments
    (keepalive_interval 0.2 s), then the result."""
    _, wire, seen = serve()
    session = Session(wire)
    request_id, reply = session.call("greet")
    ask = reply.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert [reply.next_item(), reply.next_item()] == [("comment", "keep-alive")] * 2
    assert seen.threads["greet"] == reply.thread
    assert session.answer(ask["id"], {"action": "accept", "content": {"name": "Bo"}}) == 202
    final = reply.rest()
    assert final[-1]["id"] == request_id and final[-1]["result"]["content"][0]["text"] == "Hello, Bo!"


# -- clients that go away -------------------------------------------------------------------


def test_a_session_client_gone_past_the_resume_window_aborts_the_handler(serve):
    """The client closes its connection while the handler waits: the sink notices, nobody
    resumes within resume_window, the handler is woken with ClientDisconnected and its slots
    (the waiting call, the call budget, the session's call) are freed."""
    app, wire, seen = serve(resume_window=0.5, stream_retry=0.1)
    session = Session(wire)
    _, reply = session.call("greet")
    ask = reply.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert app.server.pending.count() == 1 and app.server.admission.running == 1
    assert seen.threads["greet"] == reply.thread
    reply.close()
    aborted = seen.wait_aborted("greet")
    assert isinstance(aborted, zemcp.ClientDisconnected), aborted
    assert "did not resume the stream within 0.5 s" in str(aborted)
    assert app.server.pending.count() == 0
    deadline = time.monotonic() + TIMEOUT
    while app.server.admission.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.server.admission.running == 0
    assert not app.server.sessions.get(session.id).calls()


def test_a_modern_client_gone_mid_stream_aborts_the_handler(serve):
    """2026-07-28: closing the stream is the cancellation. The handler's next notification
    finds the connection gone and raises ClientDisconnected; its call budget slot is freed."""
    app, wire, seen = serve()
    _, reply = modern_call(wire, "counting", {"progressToken": "p-2"})
    assert_stream(reply)
    first = reply.next_message()
    assert first is not None and first["params"] == {"progressToken": "p-2", "progress": 1}
    assert seen.threads["counting"] == reply.thread and app.server.admission.running == 1
    reply.close()
    aborted = seen.wait_aborted("counting")
    assert isinstance(aborted, zemcp.ClientDisconnected), aborted
    deadline = time.monotonic() + TIMEOUT
    while app.server.admission.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.server.admission.running == 0


# -- 2026-07-28: multi-round-trip elicitation -----------------------------------------------


def test_a_modern_eliciting_call_answers_input_required_then_completes(serve):
    """Round 1 ends at the question with an InputRequiredResult as one JSON body (the handler
    leaves nothing behind); round 2, with the answer and the requestState, completes."""
    app, wire, seen = serve()
    message, reply = modern_call(wire, "greet")
    assert reply.status == 200 and reply.header("Content-Length") is not None
    first = reply.json()
    assert first["id"] == message["id"]
    result = first["result"]
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["user_name"]
    assert result["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert seen.threads["greet"] == reply.thread and app.server.admission.running == 0
    answer = {"user_name": {"action": "accept", "content": {"name": "Cy"}}}
    message, reply = modern_call(wire, "greet", inputResponses=answer, requestState=result["requestState"])
    second = reply.json()
    assert second["id"] == message["id"] and second["result"]["resultType"] == "complete"
    assert second["result"]["content"][0]["text"] == "Hello, Cy!"
    assert seen.threads["greet"] == reply.thread


# -- resumable streams ----------------------------------------------------------------------


def test_a_stream_whose_connection_closed_is_resumed_with_last_event_id(serve):
    """The client's connection closes after the question and the sink lets the stream go (no
    connection reads it); a GET with the priming event's id replays the question on a new
    connection, and the result, produced on the first connection's thread once the answer
    arrives, reaches the resumed stream."""
    app, wire, seen = serve(resume_window=5, stream_retry=0.1)
    session = Session(wire)
    request_id, reply = session.call("greet")
    assert reply.next_item() == ("event", "")
    priming = reply.last_event_id
    ask = reply.next_message()
    assert ask is not None
    log, _ = app.server.sessions.get(session.id).streams.find(priming)
    assert log.attached
    reply.close()
    deadline = time.monotonic() + TIMEOUT
    while log.attached and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not log.attached, f"the stream still had a reader {TIMEOUT:g} s after its client left"
    resumed = session.resume(priming)
    assert_stream(resumed)
    assert resumed.next_message() == ask
    assert session.answer(ask["id"], {"action": "accept", "content": {"name": "Di"}}) == 202
    final = resumed.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "Hello, Di!"
    assert seen.threads["greet"] == reply.thread != resumed.thread
    assert "greet" not in seen.aborted and app.server.pending.count() == 0


def test_close_sse_stream_ends_the_connection_and_the_handler_goes_on(serve):
    """ctx.close_sse_stream() on the direct path ends the HTTP response cleanly (a retry field,
    the last chunk, the end of the connection) while the handler goes on; its result waits
    for the GET that resumes the stream."""
    _, wire, seen = serve(stream_retry=0.1)
    session = Session(wire)
    request_id, reply = session.call("polled")
    assert_stream(reply)
    assert reply.next_item() == ("event", "")
    priming = reply.last_event_id
    assert reply.rest() == [] and reply.retry == 100
    resumed = session.resume(priming)
    final = resumed.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "after the close"
    assert seen.threads["polled"] == reply.thread
