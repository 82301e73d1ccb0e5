"""The direct-write path in-process: handlers on the request's own thread, writing through
``DirectSink`` (zemcp/replies/direct.py), as under gunicorn's gthread workers.

zemcp writes directly when the WSGI environ carries the client's socket (``gunicorn.socket``)
and ``wsgi.multithread``; werkzeug's test client has no socket, so the other in-process tests
take the pool path (``ReplySink``). Here the clients of both eras travel over a
:class:`~tests.support.wires.DirectWire`: each connection is a ``socket.socketpair()`` whose
server end is served the way gunicorn's gthread worker serves a connection (gunicorn's request
parser, its ``wsgi.create`` environ, its ``Response`` writing HTTP/1.1). The same flows under a
real gunicorn are in tests/integration.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, HandshakeClient, ModernClient, handshake_session
from tests.support.wires import DIRECT_TIMEOUT as TIMEOUT, DirectResponse, DirectWire
from zemcp import Settings

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Seen:
    """What the handlers saw: the thread each ran on and the abort each was woken with."""

    def __init__(self) -> None:
        self.threads: dict[str, str] = {}
        self.aborted: dict[str, BaseException] = {}
        #: Of each call of the ``depth`` tool: how many frames below the WSGI entry its handler ran.
        self.depths: list[int] = []

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
    def depth(ctx: zemcp.Context) -> str:
        """Counts the frames from the WSGI entry (McpApp.__call__) down to itself."""
        entry = zemcp.McpApp.__call__.__code__
        frame, below = sys._getframe(), 0
        while frame is not None and frame.f_code is not entry:
            frame, below = frame.f_back, below + 1
        seen.depths.append(below if frame is not None else -1)
        return "deep"

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
def serve() -> Iterator[Callable[..., tuple[zemcp.McpApp, DirectWire, Seen]]]:
    """``serve(**settings)``: an app, the wire to it and what its handlers saw; at teardown the
    server shuts down (waiting handlers wake) and every connection and serving thread ends."""
    started: list[tuple[zemcp.McpApp, DirectWire]] = []

    def start(**settings: Any) -> tuple[zemcp.McpApp, DirectWire, Seen]:
        seen = Seen()
        app = make_app(seen, **settings)
        wire = DirectWire(app)
        started.append((app, wire))
        return app, wire, seen

    yield start
    for app, wire in started:
        app.server.shutdown()
        wire.close()


def session(wire: DirectWire) -> HandshakeClient:
    """A 2025-11-25 session over the wire, with the elicitation capability."""
    return handshake_session(wire, name="direct-write-tests", version="1", protocol_version=LATEST_VERSION)


def answer(client: HandshakeClient, request_id: str, result: dict[str, Any]) -> int:
    """POST the answer to a server request (another connection, another thread); its body must
    be empty; returns its status."""
    reply = client.answer(request_id, result)
    assert reply.content == b"", reply.content
    return reply.status_code


def modern(wire: DirectWire) -> ModernClient:
    """A 2026-07-28 client over the wire, with the elicitation capability."""
    return ModernClient(wire)


def assert_stream(reply: DirectResponse) -> None:
    """``reply`` is an event stream as gunicorn writes one for the direct path."""
    assert reply.status_code == 200
    assert reply.headers.get("Content-Type") == "text/event-stream"
    # Written as it goes, through PEP 3333's write: no length known in advance.
    assert reply.headers.get("Transfer-Encoding") == "chunked" and reply.headers.get("Content-Length") is None


# -- plain JSON ---------------------------------------------------------------------------


def test_a_plain_handshake_call_is_answered_json_from_the_request_thread(serve):
    """A handler that sends nothing first runs on the thread serving its request and is answered
    with one application/json body of known length."""
    app, wire, seen = serve()
    request_id, reply = session(wire).call_tool("plain")
    assert reply.status_code == 200 and reply.headers.get("Content-Length") is not None
    body = wire.json(reply)
    assert body["id"] == request_id and body["result"]["content"][0]["text"] == "plain answer"
    assert seen.threads["plain"] == reply.thread
    assert app.server.admission.running == 0


def test_a_plain_modern_call_is_answered_json_from_the_request_thread(serve):
    """The same in 2026-07-28: a complete result, no session."""
    app, wire, seen = serve()
    request_id, reply = modern(wire).call_tool("plain")
    assert reply.status_code == 200 and reply.headers.get("Mcp-Session-Id") is None
    body = wire.json(reply)
    assert body["id"] == request_id and body["result"]["resultType"] == "complete"
    assert body["result"]["content"][0]["text"] == "plain answer"
    assert seen.threads["plain"] == reply.thread
    assert app.server.admission.running == 0


def test_a_handler_runs_at_most_six_frames_below_the_wsgi_entry_in_both_eras(serve):
    """What a reader follows from the WSGI entry to the handler (docs/architecture.md, "One
    eliciting call, through the files"): on the direct path the handler's own frame is at most
    the sixth below McpApp.__call__, in either era."""
    app, wire, seen = serve()
    for client in (session(wire), modern(wire)):
        request_id, reply = client.call_tool("depth")
        body = wire.json(reply)
        assert body["id"] == request_id and body["result"]["content"][0]["text"] == "deep", body
    assert len(seen.depths) == 2 and all(1 <= depth <= 6 for depth in seen.depths), seen.depths


# -- the in-place upgrade -------------------------------------------------------------------


def test_an_eliciting_call_becomes_a_stream_that_carries_the_question_and_the_result(serve):
    """Handshake era: the elicitation commits text/event-stream (a priming event first), the
    answer POSTed on another connection is taken (202), the result ends the same stream."""
    app, wire, seen = serve()
    client = session(wire)
    request_id, reply, stream = client.open_call("greet")
    assert_stream(reply)
    assert reply.headers.get("Cache-Control") == "no-cache" and reply.headers.get("X-Accel-Buffering") == "no"
    priming = stream.read_priming()  # an id, a retry field and no data
    ask = stream.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert ask["params"]["message"] == "What is your name?"
    assert stream.last_event_id != priming and stream.last_event_id.rsplit("-", 1)[0] == priming.rsplit("-", 1)[0]
    assert seen.threads["greet"] == reply.thread
    assert answer(client, ask["id"], {"action": "accept", "content": {"name": "Ada"}}) == 202
    final = stream.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    assert app.server.pending.count() == 0 and app.server.admission.running == 0


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_notifications_go_out_before_the_result(serve, era):
    """Log and progress notifications upgrade the response in place and precede the result."""
    _, wire, seen = serve()
    if era == "handshake":
        request_id, reply, stream = session(wire).open_call("chatty", meta={"progressToken": "p-1"})
    else:
        meta = {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"}
        request_id, reply, stream = modern(wire).open_call("chatty", meta=meta)
    assert_stream(reply)
    messages = stream.rest()
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
    client = session(wire)
    request_id, reply, stream = client.open_call("greet")
    ask = stream.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert [stream.next_item(), stream.next_item()] == [("comment", "keep-alive")] * 2
    assert seen.threads["greet"] == reply.thread
    assert answer(client, ask["id"], {"action": "accept", "content": {"name": "Bo"}}) == 202
    final = stream.rest()
    assert final[-1]["id"] == request_id and final[-1]["result"]["content"][0]["text"] == "Hello, Bo!"


# -- clients that go away -------------------------------------------------------------------


def test_a_session_client_gone_past_the_resume_window_aborts_the_handler(serve):
    """The client closes its connection while the handler waits: the sink notices, nobody
    resumes within resume_window, the handler is woken with ClientDisconnected and its slots
    (the waiting call, the call budget, the session's call) are freed."""
    app, wire, seen = serve(resume_window=0.5, stream_retry=0.1)
    client = session(wire)
    _, reply, stream = client.open_call("greet")
    ask = stream.next_message()
    assert ask is not None and ask["method"] == "elicitation/create"
    assert app.server.pending.count() == 1 and app.server.admission.running == 1
    assert seen.threads["greet"] == reply.thread
    stream.close()
    aborted = seen.wait_aborted("greet")
    assert isinstance(aborted, zemcp.ClientDisconnected), aborted
    assert "did not resume the stream within 0.5 s" in str(aborted)
    assert app.server.pending.count() == 0
    deadline = time.monotonic() + TIMEOUT
    while app.server.admission.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.server.admission.running == 0
    assert not app.server.sessions.get(client.session_id).calls()


def test_a_modern_client_gone_mid_stream_aborts_the_handler(serve):
    """2026-07-28: closing the stream is the cancellation. The handler's next notification
    finds the connection gone and raises ClientDisconnected; its call budget slot is freed."""
    app, wire, seen = serve()
    _, reply, stream = modern(wire).open_call("counting", meta={"progressToken": "p-2"})
    assert_stream(reply)
    first = stream.next_message()
    assert first is not None and first["params"] == {"progressToken": "p-2", "progress": 1}
    assert seen.threads["counting"] == reply.thread and app.server.admission.running == 1
    stream.close()
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
    client = modern(wire)
    request_id, reply = client.call_tool("greet")
    assert reply.status_code == 200 and reply.headers.get("Content-Length") is not None
    first = wire.json(reply)
    assert first["id"] == request_id
    result = first["result"]
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["user_name"]
    assert result["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert seen.threads["greet"] == reply.thread and app.server.admission.running == 0
    request_id, reply = client.answer("greet", result, {"user_name": {"action": "accept", "content": {"name": "Cy"}}})
    second = wire.json(reply)
    assert second["id"] == request_id and second["result"]["resultType"] == "complete"
    assert second["result"]["content"][0]["text"] == "Hello, Cy!"
    assert seen.threads["greet"] == reply.thread


# -- resumable streams ----------------------------------------------------------------------


def test_a_stream_whose_connection_closed_is_resumed_with_last_event_id(serve):
    """The client's connection closes after the question and the sink lets the stream go (no
    connection reads it); a GET with the priming event's id replays the question on a new
    connection, and the result, produced on the first connection's thread once the answer
    arrives, reaches the resumed stream."""
    app, wire, seen = serve(resume_window=5, stream_retry=0.1)
    client = session(wire)
    request_id, reply, stream = client.open_call("greet")
    priming = stream.read_priming()
    ask = stream.next_message()
    assert ask is not None
    log, _ = app.server.sessions.get(client.session_id).streams.find(priming)
    assert log.attached
    stream.close()
    deadline = time.monotonic() + TIMEOUT
    while log.attached and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not log.attached, f"the stream still had a reader {TIMEOUT:g} s after its client left"
    resumed, resumed_stream = client.get_stream(priming)
    assert_stream(resumed)
    assert resumed_stream.next_message() == ask
    assert answer(client, ask["id"], {"action": "accept", "content": {"name": "Di"}}) == 202
    final = resumed_stream.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "Hello, Di!"
    assert seen.threads["greet"] == reply.thread != resumed.thread
    assert "greet" not in seen.aborted and app.server.pending.count() == 0


def test_close_sse_stream_ends_the_connection_and_the_handler_goes_on(serve):
    """ctx.close_sse_stream() on the direct path ends the HTTP response cleanly (a retry field,
    the last chunk, the end of the connection) while the handler goes on; its result waits
    for the GET that resumes the stream."""
    _, wire, seen = serve(stream_retry=0.1)
    client = session(wire)
    request_id, reply, stream = client.open_call("polled")
    assert_stream(reply)
    priming = stream.read_priming()
    assert stream.rest() == [] and stream.retry == 100
    _, resumed = client.get_stream(priming)
    final = resumed.rest()
    assert [m["id"] for m in final] == [request_id]
    assert final[0]["result"]["content"][0]["text"] == "after the close"
    assert seen.threads["polled"] == reply.thread
