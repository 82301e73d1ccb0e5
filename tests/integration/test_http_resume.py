"""Resumable streams over real gunicorn (MCP basic/transports, "Resumability and Redelivery"; SEP-1699).

A dropped connection is not a lost call: the handler keeps waiting, its events are kept, and
a GET with ``Last-Event-ID`` resumes the stream; answers sent meanwhile reach the handler;
unknown, foreign and dropped ids are refused; the server may end a connection on purpose.
"""

import http.client
import json
import re
import socket
import time

import pytest

from tests.support.clients import HandshakeClient
from tests.support.sse import SseStream

STREAMS_APP = "tests.apps.streams:app"
EVENT_ID = re.compile(r"^([A-Za-z0-9_-]+)-(\d+)$")


def ask(client: HandshakeClient, chatter: int = 0, tool: str = "ask") -> tuple[dict, SseStream, dict]:
    """Call ``tool`` and read up to its elicitation/create; returns the call, the stream, the question."""
    call = client.call_message({"chatter": chatter} if tool == "ask" else {}, name=tool)
    response, stream = client.open_stream(call)
    assert response.status_code == 200 and stream is not None, (response.status_code, response.text)
    while True:
        message = stream.next_message()
        assert message is not None, f"the stream ended before the question: {stream.events}"
        if message.get("method") == "elicitation/create":
            return call, stream, message


def resume(client: HandshakeClient, last_event_id: str) -> SseStream:
    response, stream = client.get_stream(last_event_id)
    assert response.status_code == 200 and stream is not None, (response.status_code, response.text)
    return stream


def final_of(stream: SseStream, call: dict) -> dict:
    for message in stream.rest():
        if message.get("id") == call["id"]:
            return message
    pytest.fail(f"no response for request {call['id']} on the stream: {stream.events}")


def test_a_stream_starts_with_a_priming_event_and_every_event_has_an_id(start_server):
    """The upgraded response opens with an id, a retry field and empty data; every event has an
    id of the same stream, numbered upwards."""
    server = start_server(app=STREAMS_APP, stream_retry=0.25)
    client = server.session()
    call, stream, question = ask(client, chatter=2)
    assert stream.retry == 250
    first = stream.ids[0]
    assert EVENT_ID.match(first), first
    assert stream.events[0]["id"] != first, "the priming event must come before the first message"
    prefixes = {EVENT_ID.match(i).group(1) for i in stream.ids}
    numbers = [int(EVENT_ID.match(i).group(2)) for i in stream.ids]
    assert len(prefixes) == 1 and numbers == sorted(set(numbers)), stream.ids
    assert client.accept(question["id"], {"word": "x"}).status_code == 202
    final = final_of(stream, call)
    assert final["result"]["content"][0]["text"] == "word: x"
    assert EVENT_ID.match(stream.events[-1]["id"]).group(1) in prefixes


def test_resume_after_a_drop_then_answer(start_server):
    """Drop the connection after elicitation/create, wait past the old abort, resume with
    Last-Event-ID, answer: the result arrives on the resumed stream."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    client = server.session()
    call, stream, question = ask(client)
    last = stream.last_event_id
    stream.close()
    time.sleep(1.5)
    assert client.status()["pending"] == 1, "the handler must keep waiting after a disconnect"
    resumed = resume(client, last)
    assert client.accept(question["id"], {"word": "back"}).status_code == 202
    final = final_of(resumed, call)
    assert final["result"]["content"][0]["text"] == "word: back"
    assert resumed.ended


def test_an_answer_sent_while_disconnected_reaches_the_handler(start_server):
    """The answer POSTed while no connection reads the stream is not lost: resuming later gets the result."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    client = server.session()
    call, stream, question = ask(client)
    last = stream.last_event_id
    stream.close()
    time.sleep(1.2)
    assert client.accept(question["id"], {"word": "meanwhile"}).status_code == 202
    client.wait_pending(0)
    final = final_of(resume(client, last), call)
    assert final["result"]["content"][0]["text"] == "word: meanwhile"


def test_resuming_from_an_earlier_id_replays_the_missed_events_in_order(start_server):
    """Resuming from the priming event's id replays every message after it, in order, then goes on live."""
    server = start_server(app=STREAMS_APP)
    client = server.session()
    call, stream, question = ask(client, chatter=3)
    priming = stream.ids[0]
    seen = [event["data"] for event in stream.events]
    stream.close()
    resumed = resume(client, priming)
    replayed = [resumed.next_message() for _ in seen]
    assert replayed == seen
    assert [m["params"]["data"] for m in replayed[:3]] == ["chatter 1", "chatter 2", "chatter 3"]
    assert client.accept(question["id"], {"word": "r"}).status_code == 202
    assert final_of(resumed, call)["result"]["content"][0]["text"] == "word: r"


def test_a_new_connection_takes_the_stream_over(start_server):
    """A resuming GET while another connection still reads the stream takes it: the old one ends
    and the response goes to the new one only."""
    server = start_server(app=STREAMS_APP)
    client = server.session()
    call, stream, question = ask(client)
    resumed = resume(client, stream.last_event_id)
    assert client.accept(question["id"], {"word": "new"}).status_code == 202
    assert final_of(resumed, call)["result"]["content"][0]["text"] == "word: new"
    assert all(m.get("id") != call["id"] for m in stream.rest()), "the response went to the old connection too"


def test_the_window_expiring_cancels_the_call(start_server):
    """With nobody back within ZEMCP_RESUME_WINDOW the waiting call is given up as a disconnect,
    and a late answer changes nothing."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3, resume_window=2, stream_retry=0.5)
    observer = server.session(name="observer")
    client = server.session()
    call, stream, question = ask(client)
    last = stream.last_event_id
    stream.close()
    time.sleep(1.0)
    assert observer.status()["pending"] == 1, "given up before the window ended"
    observer.wait_pending(0, deadline=5.0)
    # Nothing waits for an answer any more: it is refused, and says so.
    assert client.accept(question["id"], {"word": "late"}).status_code == 400
    final = final_of(resume(client, last), call)
    assert final["result"]["isError"] is True
    assert "disconnect" in final["result"]["content"][0]["text"].lower()


def test_the_replay_buffer_keeps_only_the_newest_events(start_server):
    """Beyond ZEMCP_STREAM_BUFFER_EVENTS the oldest events are dropped: resuming from before them is 410,
    from a kept one works."""
    server = start_server(app=STREAMS_APP, stream_buffer_events=3)
    client = server.session()
    call, stream, question = ask(client, chatter=5)
    ids = [event["id"] for event in stream.events]
    stream.close()
    response, _ = client.get_stream(stream.ids[0])
    assert response.status_code == 410, response.text
    assert "ZEMCP_STREAM_BUFFER_EVENTS" in response.json()["error"]["message"]
    resumed = resume(client, ids[-3])
    assert [m.get("method") for m in (resumed.next_message(), resumed.next_message())] == [
        "notifications/message",
        "elicitation/create",
    ]
    assert client.accept(question["id"], {"word": "kept"}).status_code == 202
    assert final_of(resumed, call)["result"]["content"][0]["text"] == "word: kept"


def test_the_replay_buffer_is_bounded_in_bytes(start_server):
    """ZEMCP_STREAM_BUFFER_BYTES bounds a stream's buffer too."""
    server = start_server(app=STREAMS_APP, stream_buffer_bytes=400)
    client = server.session()
    _, stream, question = ask(client, chatter=8)
    first_message = stream.events[0]["id"]
    stream.close()
    response, _ = client.get_stream(first_message)
    assert response.status_code == 410, response.text
    client.accept(question["id"], {"word": "x"})


def test_foreign_unknown_and_malformed_ids_are_refused(start_server):
    """Another session's event id is 404 (never its events), a number past the stream's is 404,
    a malformed id is 400, an unknown session is 404."""
    server = start_server(app=STREAMS_APP)
    owner = server.session(name="owner")
    stranger = server.session(name="stranger")
    _, stream, question = ask(owner)
    event_id = stream.last_event_id
    response, _ = stranger.get_stream(event_id)
    assert response.status_code == 404, response.text
    assert "another session" in response.json()["error"]["message"]
    stream_id = EVENT_ID.match(event_id).group(1)
    for bad, status in ((f"{stream_id}-999", 404), ("not an id", 400), ("-5", 400), ("x-1", 404)):
        response, _ = owner.get_stream(bad)
        assert response.status_code == status, (bad, response.status_code, response.text)
    lost = HandshakeClient(server.url)
    lost.session_id, lost.protocol_version = "nobody.here", owner.protocol_version
    response, _ = lost.get_stream(event_id)
    assert response.status_code == 404
    owner.accept(question["id"], {"word": "x"})


def test_a_resumed_stream_counts_in_the_thread_budget(start_server):
    """A connection reading a resumed stream holds a thread: the status counts it while it is open."""
    server = start_server(app=STREAMS_APP)
    client = server.session()
    call, stream, question = ask(client)
    stream.close()
    resumed = resume(client, stream.last_event_id)
    assert client.status()["resuming_streams"] == 1
    client.accept(question["id"], {"word": "x"})
    final_of(resumed, call)
    deadline = time.monotonic() + 5
    while client.status()["resuming_streams"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.status()["resuming_streams"] == 0


def test_the_server_may_end_a_connection_on_purpose(start_server):
    """ctx.close_sse_stream() ends the POST's connection cleanly after a retry field; the client
    reconnects, gets the question there, answers, and gets the result."""
    server = start_server(app=STREAMS_APP, stream_retry=0.2)
    client = server.session()
    call = client.call_message({}, name="poll_then_ask")
    response, stream = client.open_stream(call)
    assert stream is not None
    assert stream.rest() == [] and stream.ended
    assert stream.retry == 200 and stream.ids
    resumed = resume(client, stream.last_event_id)
    question = resumed.next_message()
    assert question["method"] == "elicitation/create"
    client.accept(question["id"], {"word": "polled"})
    assert final_of(resumed, call)["result"]["content"][0]["text"] == "word: polled"


def test_sse_polling_ends_every_connection_after_the_interval(start_server):
    """ZEMCP_STREAM_POLL_INTERVAL ends a waiting stream's connections, each with retry; the client's
    reconnects carry the call to its end."""
    server = start_server(app=STREAMS_APP, stream_poll_interval=1, stream_retry=0.1, keepalive_interval=0.3)
    client = server.session()
    call, stream, question = ask(client)
    started = time.monotonic()
    assert stream.rest() == []
    assert 0.8 <= time.monotonic() - started <= 4, "the connection was not ended after the poll interval"
    second = resume(client, stream.last_event_id)
    assert second.rest() == [] and second.retry == 100
    third = resume(client, second.last_event_id or stream.last_event_id)
    client.accept(question["id"], {"word": "p"})
    assert final_of(third, call)["result"]["content"][0]["text"] == "word: p"


def eliciting_call_on(connection: http.client.HTTPConnection, client: HandshakeClient) -> http.client.HTTPResponse:
    """Run ze_execute's eliciting call on ``connection`` to its end (the answer goes on the client's own)."""
    call = client.call_message({})
    connection.request("POST", "/mcp", json.dumps(call), client.headers({"Content-Type": "application/json"}))
    response = connection.getresponse()
    assert response.getheader("Content-Type") == "text/event-stream"
    while not (line := response.readline()).startswith(b"data: {"):
        assert line, "the stream ended before the elicitation"
    question = json.loads(line[len(b"data: ") :])
    assert client.accept(question["id"], {"command": "help"}).status_code == 202
    rest = response.read()
    assert f'"id":{json.dumps(call["id"])}'.encode() in rest, rest[-300:]
    return response


def test_a_streamed_call_keeps_its_connection_for_the_next_request(server):
    """A session's eliciting call answers keep-alive: the next request goes on the same connection."""
    client = server.session()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        response = eliciting_call_on(connection, client)
        assert response.getheader("Connection") == "keep-alive"
        sock = connection.sock
        assert sock is not None, "the client closed the connection after the stream"
        connection.request(
            "POST",
            "/mcp",
            json.dumps({"jsonrpc": "2.0", "id": client.new_id(), "method": "ping"}),
            client.headers({"Content-Type": "application/json"}),
        )
        assert connection.getresponse().read() and connection.sock is sock
    finally:
        connection.close()


def test_with_a_poll_interval_a_stream_says_connection_close(start_server):
    """With ZEMCP_STREAM_POLL_INTERVAL set, a stream's connection may be ended early: it says so at the start."""
    server = start_server(stream_poll_interval=30)
    client = server.session()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        assert eliciting_call_on(connection, client).getheader("Connection") == "close"
    finally:
        connection.close()


def test_a_finished_stream_can_still_be_resumed_within_the_window(start_server):
    """A client that lost the connection just before the response gets it by resuming after the end."""
    server = start_server(app=STREAMS_APP)
    client = server.session()
    call, stream, question = ask(client)
    last = stream.last_event_id
    stream.close()
    client.accept(question["id"], {"word": "done"})
    client.wait_pending(0)
    time.sleep(0.3)
    assert final_of(resume(client, last), call)["result"]["content"][0]["text"] == "word: done"


def test_a_resume_without_room_for_a_thread_is_a_poll(start_server):
    """With the call budget taken by waiting calls, a resuming GET still gets what the stream
    holds and ends with a retry field (it holds no thread); polling again brings the response."""
    server = start_server(app=STREAMS_APP, threads=4, keepalive_interval=0.3, stream_retry=0.2, client_share=1)
    first = server.session(name="first")
    second = server.session(name="second")
    calls = [ask(first), ask(second)]
    for _, stream, _ in calls:
        stream.close()
    (call, stream, question), _ = calls
    polled = resume(first, stream.last_event_id)
    messages = polled.rest()
    assert polled.ended and polled.retry == 200
    assert [m["method"] for m in messages] == [], "nothing new since the id the client had"
    assert first.accept(question["id"], {"word": "polled"}).status_code == 202
    deadline = time.monotonic() + 10
    final = None
    while final is None and time.monotonic() < deadline:
        again = resume(first, polled.last_event_id or stream.last_event_id)
        final = next((m for m in again.rest() if m.get("id") == call["id"]), None)
        time.sleep(0.2)
    assert final is not None and final["result"]["content"][0]["text"] == "word: polled"
    other_call, other_stream, other_question = calls[1]
    second.accept(other_question["id"], {"word": "x"})


def test_a_takeover_needs_no_new_place(start_server):
    """With the only standalone place taken by a connection that is still open, resuming that
    stream with its Last-Event-ID takes it over instead of getting 429."""
    server = start_server(app=STREAMS_APP, max_standalone_streams=1, keepalive_interval=0.3)
    client = server.session()
    response, old = client.get_stream()
    assert response.status_code == 200 and old is not None
    last = old.read_priming()
    response, new = client.get_stream(last)
    assert response.status_code == 200 and new is not None, response.text
    assert old.rest() == [] and old.ended, "the connection taken over must stop"
    response = client.post(client.call_message({}, name="add_tool"))
    assert response.status_code == 200
    assert new.next_message()["method"] == "notifications/tools/list_changed"
    deadline = time.monotonic() + 5
    while client.status()["standalone_streams"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.status()["standalone_streams"] == 1


def test_a_given_up_call_keeps_its_response_for_a_late_resume(start_server):
    """After the window the call is given up, and its error result can still be resumed for another
    window, even when the session's streams were pruned meanwhile."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3, resume_window=1.5, stream_retry=0.2)
    client = server.session()
    call, stream, _ = ask(client)
    last = stream.last_event_id
    stream.close()
    client.wait_pending(0, deadline=6)
    # Any GET of the session prunes its streams.
    response, _ = client.get_stream(f"{last.rpartition('-')[0]}x-1")
    assert response.status_code == 404
    final = final_of(resume(client, last), call)
    text = final["result"]["content"][0]["text"]
    assert final["result"]["isError"] is True and "did not resume the stream within 1.5 s" in text, text


def test_the_poll_interval_ends_a_busy_connection_too(start_server):
    """A stream that sends all the time is still ended after ZEMCP_STREAM_POLL_INTERVAL."""
    server = start_server(app=STREAMS_APP, stream_poll_interval=1, stream_retry=0.1)
    client = server.session()
    call = client.call_message({"count": 20, "delay": 0.2}, name="talk")
    started = time.monotonic()
    response, stream = client.open_stream(call)
    assert stream is not None
    first = stream.rest()
    assert stream.ended and time.monotonic() - started < 2.5, "the busy connection was not ended"
    assert first and all(m["method"] == "notifications/message" for m in first)
    seen = list(first)
    last = stream.last_event_id
    while not any(m.get("id") == call["id"] for m in seen):
        again = resume(client, last)
        seen += again.rest()
        last = again.last_event_id or last
    logs = [m["params"]["data"] for m in seen if m.get("method") == "notifications/message"]
    assert [entry.split(":")[0] for entry in logs] == [str(n) for n in range(20)], "events lost or repeated"


def test_a_client_that_stops_reading_is_cut_and_its_call_can_be_cancelled(start_server):
    """A client whose receive window is full is treated as gone after ZEMCP_BODY_TIMEOUT: the
    handler is no longer stuck in a write, so notifications/cancelled ends the call."""
    server = start_server(app=STREAMS_APP, body_timeout=1, keepalive_interval=0.3)
    client = server.session()
    body = json.dumps(client.call_message({"count": 400, "size": 20000, "delay": 0.01}, name="talk"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    headers = client.headers()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if v is not None)
    sock.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body.encode()
    )
    try:
        time.sleep(2.5)
        request_id = json.loads(body)["id"]
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        assert client.post(cancel).status_code == 202
        deadline = time.monotonic() + 5
        while client.status()["running"] > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.status()["running"] == 1, "the call of the client that stopped reading still runs"
    finally:
        sock.close()


@pytest.mark.slow
def test_one_session_holds_at_most_its_share_of_resumed_streams(start_server):
    """Resumed streams of one session hold threads up to its pending share; beyond it a resume is a poll."""
    server = start_server(app=STREAMS_APP, threads=8, keepalive_interval=0.3, stream_retry=0.2, client_share=1)
    client = server.session()
    share = 2  # session_pending_budget at 8 threads
    calls = []
    for _ in range(share + 1):
        call = client.call_message({"count": 25, "delay": 0.2}, name="talk")
        response, stream = client.open_stream(call)
        assert stream is not None and stream.next_message() is not None
        stream.close()
        calls.append((call, stream))
    held = [resume(client, stream.last_event_id) for _, stream in calls[:share]]
    started = time.monotonic()
    polled = resume(client, calls[share][1].last_event_id)
    polled.rest()
    assert polled.ended and time.monotonic() - started < 2, "the resume beyond the share held its connection"
    assert client.status()["resuming_streams"] == share
    for (call, _), stream in zip(calls, held):
        assert final_of(stream, call)["result"]["content"][0]["text"] == "talked 25 times"


def test_a_poll_of_a_busy_stream_ends_at_once(start_server):
    """A poll (no room to hold a thread) ends after delivering what the stream holds, even while
    the handler keeps sending: it must not hold a thread outside the budget."""
    server = start_server(app=STREAMS_APP, threads=4, keepalive_interval=0.3, stream_retry=0.2, client_share=1)
    client = server.session()
    calls = []
    for _ in range(2):
        call = client.call_message({"count": 200, "delay": 0.02}, name="talk")
        response, stream = client.open_stream(call)
        assert stream is not None and stream.next_message() is not None
        stream.close()
        calls.append((call, stream))
    started = time.monotonic()
    polled = resume(client, calls[0][1].last_event_id)
    got = polled.rest()
    assert polled.ended and time.monotonic() - started < 1.5, "the poll of a busy stream held its connection"
    assert got and polled.retry == 200
    for call, stream in calls:
        last = stream.last_event_id
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            again = resume(client, last)
            messages = again.rest()
            last = again.last_event_id or last
            if any(m.get("id") == call["id"] for m in messages):
                break
        else:
            pytest.fail("the call's response never came on a poll")


def test_a_resumed_reader_that_reads_nothing_is_cut_quietly(start_server):
    """A GET that resumes a stream and then reads nothing is cut after ZEMCP_BODY_TIMEOUT, gives
    its place back, and leaves no error in the log."""
    server = start_server(app=STREAMS_APP, body_timeout=1, keepalive_interval=0.3)
    client = server.session()
    call = client.call_message({"count": 200, "size": 20000, "delay": 0.01}, name="talk")
    response, stream = client.open_stream(call)
    assert stream is not None and stream.next_message() is not None
    stream.close()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    headers = client.headers(
        {"Accept": "text/event-stream", "Content-Type": None, "Last-Event-ID": stream.last_event_id}
    )
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if v is not None)
    sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode())
    try:
        deadline = time.monotonic() + 2
        while client.status()["resuming_streams"] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.status()["resuming_streams"] == 1
        started = time.monotonic()
        while client.status()["resuming_streams"] and time.monotonic() - started < 6:
            time.sleep(0.1)
        assert client.status()["resuming_streams"] == 0, "the stalled reader still holds its place"
        assert time.monotonic() - started < 4
        assert "Socket error processing request" not in server.log()
    finally:
        sock.close()
