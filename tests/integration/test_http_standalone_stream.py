"""A session's standalone GET stream over real gunicorn (MCP basic/transports, "Listening for
Messages from the Server"): list changes and resource updates reach a client outside any
call, one stream per session, capped per process and counted in the thread budget."""

import time

from tests.support.clients import HandshakeClient
from tests.support.sse import SseStream

STREAMS_APP = "tests.apps.streams:app"


def open_listener(client: HandshakeClient) -> SseStream:
    """Open the session's standalone stream and read its priming event."""
    response, stream = client.get_stream()
    assert response.status_code == 200 and stream is not None, (response.status_code, response.text)
    stream.read_priming()
    return stream


def call_text(client: HandshakeClient, name: str, arguments: dict | None = None) -> str:
    response = client.post(client.call_message(arguments or {}, name=name))
    assert response.status_code == 200, response.text
    return response.json()["result"]["content"][0]["text"]


def test_capabilities_announce_list_changes_and_subscriptions(start_server):
    """initialize declares listChanged and resources.subscribe when standalone streams are on,
    and neither (with GET answered 405) when ZEMCP_MAX_STANDALONE_STREAMS=0."""
    on = start_server(app=STREAMS_APP).session()
    capabilities = on.init_response.json()["result"]["capabilities"]
    assert capabilities["tools"]["listChanged"] is True
    assert capabilities["resources"] == {"listChanged": True, "subscribe": True}
    off = start_server(app=STREAMS_APP, max_standalone_streams=0).session()
    capabilities = off.init_response.json()["result"]["capabilities"]
    assert capabilities["tools"]["listChanged"] is False
    assert "subscribe" not in capabilities["resources"]
    response, _ = off.get_stream()
    assert response.status_code == 405 and "ZEMCP_MAX_STANDALONE_STREAMS=0" in response.json()["error"]["message"]


def test_the_standalone_stream_carries_list_changed_and_resource_updates(start_server):
    """A tool registered at run time sends tools/list_changed on every session's GET stream; an
    update of a subscribed resource reaches the subscriber only."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    subscriber = server.session(name="subscriber")
    bystander = server.session(name="bystander")
    stream = open_listener(subscriber)
    other = open_listener(bystander)
    assert stream.retry == 1000
    assert subscriber.rpc("resources/subscribe", {"uri": "test://watched"}) == {}
    name = call_text(subscriber, "add_tool")
    assert stream.next_message() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    assert other.next_message()["method"] == "notifications/tools/list_changed"
    assert name in [tool["name"] for tool in subscriber.rpc("tools/list")["tools"]]
    assert call_text(bystander, "touch", {"uri": "test://watched"}) == "1"
    assert stream.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://watched"},
    }
    assert call_text(bystander, "touch", {"uri": "test://other"}) == "0"
    assert subscriber.rpc("resources/unsubscribe", {"uri": "test://watched"}) == {}
    assert call_text(bystander, "touch", {"uri": "test://watched"}) == "0"
    assert stream.ids and stream.events[-1]["id"].startswith(stream.ids[0].rpartition("-")[0])


def test_requests_of_a_call_go_on_its_own_stream_never_the_get_stream(start_server):
    """While the GET stream is open, an eliciting call's question arrives on the call's POST stream
    (SEP-2260); the GET stream gets only keep-alives."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    client = server.session()
    stream = open_listener(client)
    call = client.call_message({}, name="ask")
    response, post = client.open_stream(call)
    assert post is not None
    question = post.next_message()
    assert question["method"] == "elicitation/create"
    assert stream.wait_comments(2)
    client.accept(question["id"], {"word": "w"})
    assert post.rest()[-1]["result"]["content"][0]["text"] == "word: w"
    assert stream.events == []


def test_one_standalone_stream_per_session(start_server):
    """A second GET without Last-Event-ID while the first is open is 409; resuming it with its id works."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    client = server.session()
    first = open_listener(client)
    response, _ = client.get_stream()
    assert response.status_code == 409, response.text
    assert "Last-Event-ID" in response.json()["error"]["message"]
    first.close()
    resumed_response, resumed = client.get_stream(first.last_event_id)
    assert resumed_response.status_code == 200 and resumed is not None
    call_text(client, "add_tool")
    assert resumed.next_message()["method"] == "notifications/tools/list_changed"


def test_a_resumed_standalone_stream_replays_what_was_missed(start_server):
    """A list change announced while the GET stream was down is replayed when the client resumes it."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    client = server.session()
    stream = open_listener(client)
    last = stream.last_event_id
    stream.close()
    time.sleep(1.0)
    call_text(client, "add_tool")
    response, resumed = client.get_stream(last)
    assert response.status_code == 200 and resumed is not None
    assert resumed.next_message()["method"] == "notifications/tools/list_changed"


def test_standalone_streams_are_capped_per_process_and_counted(start_server):
    """ZEMCP_MAX_STANDALONE_STREAMS caps open standalone streams per process: beyond it the GET gets
    an event stream that says why, carries retry (30 s) and no event id, and ends at once; an
    open one counts in the thread budget; ending the session frees its place."""
    server = start_server(app=STREAMS_APP, max_standalone_streams=1, keepalive_interval=0.3)
    first = server.session(name="first")
    second = server.session(name="second")
    stream = open_listener(first)
    status = first.status()
    assert status["standalone_streams"] == 1 and status["running"] >= 1
    started = time.monotonic()
    response, _ = second.get_stream()
    body = response.text
    assert time.monotonic() - started < 5, "the refusal stream ends at once"
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Retry-After"] == "30", response.headers
    lines = body.splitlines()
    assert lines[0].startswith(": ") and "ZEMCP_MAX_STANDALONE_STREAMS" in lines[0], body
    assert "retry: 30000" in lines and not any(line.startswith(("id:", "data:")) for line in lines), body
    assert first.status()["standalone_streams"] == 1, "the refused GET held no place"
    assert first.delete().status_code == 204
    assert stream.rest() == [] and stream.ended
    response, later = second.get_stream()
    assert response.status_code == 200 and later is not None


def test_get_needs_the_event_stream_accept_and_a_live_session(start_server):
    """GET without text/event-stream in Accept is 406; with an unknown session 404; without one 405."""
    server = start_server(app=STREAMS_APP)
    client = server.session()
    response, _ = client.get_stream(headers={"Accept": "application/json"})
    assert response.status_code == 406
    lost = HandshakeClient(server.url)
    lost.session_id, lost.protocol_version = "gone.session", client.protocol_version
    response, _ = lost.get_stream()
    assert response.status_code == 404
    anonymous = HandshakeClient(server.url)
    response, _ = anonymous.get_stream()
    assert response.status_code == 405 and "GET" in response.headers["Allow"]
