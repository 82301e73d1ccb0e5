"""Fair shares of the threads per client, over real gunicorn (docs/transport.md, "Fair shares").

A client, however many sessions it opens, holds at most ZEMCP_CLIENT_SHARE of each thread
budget; the others' calls, elicitations and streams are still served. Clients are told apart
by their address: these tests connect from other loopback addresses (127.0.0.2, 127.0.0.3),
or through X-Forwarded-For from a trusted proxy address.
"""

from __future__ import annotations

import time

from tests.support.clients import HandshakeClient
from tests.support.sse import SseStream

STREAMS_APP = "tests.apps.streams:app"
HOSTILE, POLITE = "127.0.0.2", "127.0.0.3"


def start_question(client: HandshakeClient) -> tuple[dict, SseStream, dict]:
    """Call ``ask`` and read its stream up to the elicitation/create; returns the call, the
    stream and the question."""
    call = client.call_message({}, name="ask")
    response, stream = client.open_stream(call)
    assert response.status_code == 200 and stream is not None, (response.status_code, response.text)
    message = stream.next_message()
    assert message is not None and message.get("method") == "elicitation/create", stream.events
    return call, stream, message


def test_a_client_with_many_sessions_leaves_the_others_their_calls_and_elicitations(start_server):
    """One client's sessions fill its share of pending elicitations and then of the call budget
    (429 naming ZEMCP_CLIENT_SHARE), drop their streams (the calls then wait to be resumed, still
    counted against that client), and another client's elicitation and call are served at once."""
    # 8 threads: a call budget of 6 and 4 pending elicitations; a client may hold 4 and 3.
    server = start_server(app=STREAMS_APP, threads=8, keepalive_interval=0.3)
    hostile = [server.session(name=f"hostile-{n}", source=HOSTILE) for n in range(3)]
    held = [start_question(session) for session in hostile]
    refused = hostile[0].post(hostile[0].call_message({}, name="ask"))
    assert refused.status_code == 200, refused.text
    result = refused.json()["result"]
    assert result["isError"] and "fair share (ZEMCP_CLIENT_SHARE)" in result["content"][0]["text"], result
    long_call = hostile[1].call_message({"count": 40, "delay": 0.1}, name="talk")
    response, talking = hostile[1].open_stream(long_call)
    assert response.status_code == 200 and talking is not None and talking.next_message() is not None
    beyond = hostile[2].post(hostile[2].call_message({"count": 1, "delay": 0}, name="talk"))
    assert beyond.status_code == 429 and beyond.headers["Retry-After"] == "2", beyond.text
    message = beyond.json()["error"]["message"]
    assert "this client (address 127.0.0.2) already holds 4" in message and "ZEMCP_CLIENT_SHARE" in message, message
    for _, stream, _ in held:
        stream.close()  # the calls keep waiting for a resume (ZEMCP_RESUME_WINDOW)
    time.sleep(1.5)

    polite = server.session(name="polite", source=POLITE)
    started = time.monotonic()
    call, stream, question = start_question(polite)
    asked = time.monotonic() - started
    assert asked < 1.0, f"the other client's elicitation took {asked:.2f} s"
    answered = polite.accept(question["id"], {"word": "fair"})
    assert answered.status_code == 202, (answered.status_code, answered.text, question)
    final = [m for m in stream.rest() if m.get("id") == call["id"]]
    assert final and final[0]["result"]["content"][0]["text"] == "word: fair", stream.events
    started = time.monotonic()
    plain = polite.post(polite.call_message({"count": 0}, name="talk"))
    assert plain.status_code == 200 and time.monotonic() - started < 1.0, plain.text
    assert plain.json()["result"]["content"][0]["text"] == "talked 0 times"


def _standalone(client: HandshakeClient, headers: dict | None = None) -> tuple[str, SseStream | None]:
    """GET the session's standalone stream: ("", the live stream), or (the reason, None) for a
    stream that only tells the client to come back (a comment, retry 30 s, no id, its end)."""
    response, stream = client.get_stream(headers=headers)
    assert response.status_code == 200 and stream is not None, (response.status_code, response.text)
    item = stream.next_item()
    if stream.ids:
        return "", stream  # a live stream: its priming event came first
    assert item is not None and item[0] == "comment", item
    assert stream.rest() == [] and stream.ended and stream.retry == 30000 and not stream.ids, stream.events
    return item[1], None


def test_standalone_streams_beyond_a_clients_share_are_told_to_come_back(start_server):
    """Of the 4 standalone streams of 32 threads one client holds 3; its fourth session's GET is
    an event stream that ends at once with retry and the reason; another client still gets one."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    hostile = [server.session(name=f"hostile-{n}", source=HOSTILE) for n in range(4)]
    opened = [_standalone(session) for session in hostile]
    assert [stream is not None for _, stream in opened] == [True, True, True, False], opened
    assert "ZEMCP_CLIENT_SHARE" in opened[3][0], opened[3][0]
    polite = server.session(name="polite", source=POLITE)
    assert _standalone(polite)[1] is not None, "the other client got no standalone stream"


def test_forwarded_addresses_from_trusted_proxies_tell_clients_apart(start_server):
    """With ZEMCP_FORWARDED_ALLOW_IPS=127.0.0.1, X-Forwarded-For names the client: addresses a
    client writes to the left of the proxy's are not believed."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3, forwarded_allow_ips="127.0.0.1")
    hostile = [server.session(name=f"hostile-{n}") for n in range(4)]
    # Each session claims another origin to the left; the proxy appended the real one.
    forged = [{"X-Forwarded-For": f"198.51.100.{n}, 203.0.113.9"} for n in range(4)]
    opened = [_standalone(session, headers) for session, headers in zip(hostile, forged)]
    assert [stream is not None for _, stream in opened] == [True, True, True, False], opened
    assert "address 203.0.113.9" in opened[3][0], opened[3][0]
    polite = server.session(name="polite")
    assert _standalone(polite, {"X-Forwarded-For": "203.0.113.10"})[1] is not None


def test_forwarded_addresses_from_other_peers_are_not_believed(start_server):
    """Without ZEMCP_FORWARDED_ALLOW_IPS a client cannot make itself many clients by X-Forwarded-For."""
    server = start_server(app=STREAMS_APP, keepalive_interval=0.3)
    hostile = [server.session(name=f"hostile-{n}", source=HOSTILE) for n in range(4)]
    opened = [_standalone(session, {"X-Forwarded-For": f"203.0.113.{n}"}) for n, session in enumerate(hostile)]
    assert [stream is not None for _, stream in opened] == [True, True, True, False], opened
    assert "address 127.0.0.2" in opened[3][0], opened[3][0]
    assert "ZEMCP_FORWARDED_ALLOW_IPS does not list" in server.log()
