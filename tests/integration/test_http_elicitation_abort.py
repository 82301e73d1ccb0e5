"""A waiting elicitation cut short: timeout, notifications/cancelled, DELETE, client disconnect."""

import re
import time


def test_elicitation_timeout_sends_cancel_then_error_result(start_server):
    """With ZEMCP_ELICITATION_TIMEOUT=1 the call ends with an isError timeout result after notifications/cancelled."""
    server = start_server(elicitation_timeout=1, keepalive_interval=0.3)
    client = server.session()
    start = time.monotonic()
    call, _, stream, elicitation = client.start_elicitation()
    rest = stream.rest()
    elapsed = time.monotonic() - start
    assert 0.8 <= elapsed <= 6.0, f"a 1 s elicitation timeout ended the call after {elapsed:.2f} s"
    assert rest, "the stream ended without a response"
    final = rest[-1]
    assert final.get("id") == call["id"] and "result" in final, rest
    cancels = [
        i
        for i, m in enumerate(rest)
        if m.get("method") == "notifications/cancelled" and m.get("params", {}).get("requestId") == elicitation["id"]
    ]
    assert cancels, f"no notifications/cancelled for elicitation {elicitation['id']!r}: {rest}"
    assert cancels[0] < len(rest) - 1
    result = final["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("Error: elicit: "), text
    assert re.search(r"time[ds]? ?out|within 1(\.0+)? ?s", text, re.I), (
        f"the result does not mention the timeout: {text}"
    )
    client.wait_pending(0)
    late = client.accept(elicitation["id"], {"command": "help"})
    assert late.status_code == 400 and "timed out" in late.json()["error"]["message"]


def test_cancelled_notification_ends_stream_without_response(client):
    """notifications/cancelled for the waiting tools/call ends its stream without a response and frees the slot."""
    call, _, stream, elicitation = client.start_elicitation()
    assert client.status()["pending"] == 1
    response = client.post(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call["id"], "reason": "the user gave up"},
        }
    )
    assert response.status_code == 202, response.text
    assert response.content == b""
    start = time.monotonic()
    rest = stream.rest()
    assert stream.ended
    assert time.monotonic() - start < 5.0
    responses = [m for m in rest if m.get("id") == call["id"] and ("result" in m or "error" in m)]
    assert not responses, f"a cancelled request must get no response: {rest}"
    for message in rest:
        assert message.get("method") == "notifications/cancelled", rest
        assert message["params"]["requestId"] == elicitation["id"], rest
    client.wait_pending(0)
    late = client.accept(elicitation["id"], {"command": "help"})
    assert late.status_code == 400, late.text
    assert client.request("ping").status_code == 200


def test_delete_while_waiting_ends_streams_and_pending(server):
    """DELETE of a session with waiting elicitations answers 204, ends each stream with a session-ended error, frees the slots."""
    observer = server.session(name="observer")
    client = server.session(name="leaving")
    waits = [client.start_elicitation() for _ in range(2)]
    assert observer.status()["pending"] == 2
    response = client.delete()
    assert response.status_code == 204 and "Content-Type" not in response.headers, response.headers
    for call, _, stream, _elicitation in waits:
        rest = stream.rest()
        assert stream.ended
        assert rest, "the stream ended without a response"
        final = rest[-1]
        assert final.get("id") == call["id"] and "result" in final, rest
        assert final["result"]["isError"] is True
        text = final["result"]["content"][0]["text"]
        assert re.search(r"session.*end", text, re.I), f"the result does not say the session ended: {text}"
    observer.wait_pending(0)
    assert client.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).status_code == 404


def test_client_disconnect_frees_pending_elicitation(start_server):
    """A client closing an eliciting stream and never resuming it frees its pending elicitation
    once ZEMCP_RESUME_WINDOW has passed, not before."""
    server = start_server(keepalive_interval=0.5, resume_window=2, stream_retry=0.5)
    observer = server.session(name="observer")
    client = server.session(name="vanishing")
    call, _, stream, elicitation = client.start_elicitation()
    assert observer.status()["pending"] == 1
    stream.close()
    time.sleep(1.0)
    assert observer.status()["pending"] == 1, "a disconnect alone must not end the wait"
    observer.wait_pending(0, deadline=4.0)
    # Leaving the stream is not leaving the session.
    assert client.request("ping").status_code == 200
    assert "pending elicitations: 0" in client.command_text("session show")
    late = client.accept(elicitation["id"], {"command": "help"})
    assert late.status_code == 400, late.text


def test_stopping_the_server_ends_waiting_elicitations_at_once(start_server):
    """SIGTERM ends the sessions: a waiting stream gets its error result and gunicorn exits well
    before its 30 s graceful timeout instead of waiting for the answer."""
    import signal

    server = start_server(keepalive_interval=0.3)
    client = server.session()
    call, _, stream, _ = client.start_elicitation()
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    rest = stream.rest()
    final = rest[-1]
    assert final.get("id") == call["id"] and final["result"]["isError"] is True, rest
    assert "the server is shutting down" in final["result"]["content"][0]["text"]
    server.proc.wait(timeout=15)
    assert time.monotonic() - started < 15
    assert "ended 1 session(s) for the stop" in server.log()
