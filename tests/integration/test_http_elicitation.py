"""Elicitation end to end over gunicorn: the in-place SSE upgrade, answers, and what they lead to."""

import threading
import time

import pytest

MISSING = "Error: missing required argument: command"


def test_eliciting_call_streams_elicitation_then_result(server):
    """An eliciting ze_execute answers text/event-stream; the answer POST gets 202; the result is the last event."""
    client = server.session(name="stream-client", version="2.5")
    call = client.call_message({})
    response, stream = client.open_stream(call)
    assert response.status_code == 200
    assert response.headers["Content-Type"].split(";")[0].strip() == "text/event-stream"
    assert response.headers.get("Cache-Control") == "no-cache"
    assert response.headers.get("X-Accel-Buffering") == "no"
    assert "Content-Length" not in response.headers
    assert stream is not None

    item = stream.next_item()
    assert item is not None and item[0] == "event", f"the first thing on the stream must be an event, got {item}"
    request = item[1]["data"]
    assert item[1]["event"] == "message"
    assert request["jsonrpc"] == "2.0"
    assert request["method"] == "elicitation/create"
    assert isinstance(request["id"], str) and request["id"]
    params = request["params"]
    assert params["message"] == "Which command would you like to run?"
    schema = params["requestedSchema"]
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["command"]
    assert schema["properties"]["command"]["type"] == "string"
    assert schema.get("required") == ["command"]

    answer = client.accept(request["id"], {"command": "session show"})
    assert answer.status_code == 202, answer.text
    # An empty body says nothing of its type.
    assert answer.content == b"" and "Content-Type" not in answer.headers, answer.headers
    final = stream.next_message()
    assert final is not None
    assert final["id"] == call["id"] and "result" in final, final
    assert final["result"]["isError"] is False
    text = final["result"]["content"][0]["text"]
    assert "client: stream-client 2.5" in text
    assert stream.next_message() is None and stream.ended, "the final response must be the last event"


def test_call_with_command_answers_json_even_with_capability(client):
    """A ze_execute that does not elicit answers application/json, also for a client that can elicit."""
    response, stream = client.open_stream(client.call_message({"command": "session show"}))
    assert response.status_code == 200
    assert stream is None
    assert response.headers["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is False
    assert "elicitation: yes" in result["content"][0]["text"]


def test_call_with_command_without_capability_answers_json(server):
    """A ze_execute with a command from a client without elicitation answers application/json."""
    client = server.session(elicitation=False, name="plain-client")
    response, stream = client.open_stream(client.call_message({"command": "session show"}))
    assert response.status_code == 200 and stream is None
    assert response.headers["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is False
    text = result["content"][0]["text"]
    assert "client: plain-client" in text and "elicitation: no" in text


@pytest.mark.parametrize("arguments", [{}, {"command": ""}, {"command": "   "}])
def test_no_command_without_capability_is_missing_argument_error(server, arguments):
    """Without the capability and without a command, ze_execute answers JSON isError 'missing required argument'."""
    client = server.session(elicitation=False)
    response, stream = client.open_stream(client.call_message(arguments))
    assert response.status_code == 200 and stream is None
    assert response.headers["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == MISSING


def test_unknown_command_is_error_result(client):
    """An unknown command line comes back as an isError result, not a protocol error."""
    result = client.execute("no such command")
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Error: ")


def _finish(client, stream, call, answer_result=None, error=None, elicitation=None):
    response = client.answer(elicitation["id"], answer_result, error=error)
    assert response.status_code == 202, response.text
    assert response.content == b""
    final = stream.next_message()
    assert final is not None and final["id"] == call["id"], final
    assert stream.next_message() is None, "the final response must be the last event"
    return final["result"]


@pytest.mark.parametrize(
    "answer, error, keyword",
    [
        ({"action": "decline"}, None, "declin"),
        ({"action": "cancel"}, None, "cancel"),
        (None, {"code": -1, "message": "user closed the dialog"}, "cancel"),
        ({"action": "maybe", "content": {"command": "help"}}, None, "malformed"),
        ({"action": "accept", "content": ["help"]}, None, "malformed"),
        ({"action": "accept", "content": "help"}, None, "malformed"),
        ({"action": "accept", "content": {"command": 5}}, None, "malformed"),
        ({"action": "accept", "content": {}}, None, "malformed"),
    ],
    ids=[
        "decline",
        "cancel",
        "error-answer",
        "unknown-action",
        "content-array",
        "content-string",
        "content-wrong-type",
        "content-missing-required",
    ],
)
def test_elicitation_outcomes_become_error_results(client, answer, error, keyword):
    """Decline, cancel, an error answer and malformed answers end the call with 'Error: elicit: ...'."""
    call, _, stream, elicitation = client.start_elicitation()
    result = _finish(client, stream, call, answer, error, elicitation)
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert text.startswith("Error: elicit: "), text
    assert keyword in text.lower(), text


def test_accepted_empty_command_is_error(client):
    """An accepted empty command gives 'Error: elicit returned empty command'."""
    call, _, stream, elicitation = client.start_elicitation()
    result = _finish(client, stream, call, {"action": "accept", "content": {"command": ""}}, elicitation=elicitation)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Error: elicit returned empty command"


def test_answer_for_unknown_id_is_400_and_resolves_nothing(client):
    """An answer for an id nothing waits for gets 400 saying so (not 404, which says the session
    is gone); the pending elicitation stays pending."""
    call, _, stream, elicitation = client.start_elicitation()
    for bogus in ("zemcp-999999", elicitation["id"] + "-x", 12345):
        response = client.accept(bogus, {"command": "help"})
        assert response.status_code == 400, response.text
        assert "no request of this session is waiting for an answer" in response.json()["error"]["message"]
    # Nothing was resolved: the stream only carries keep-alives, and the session still waits.
    stream.wait_comments(1)
    assert "pending elicitations: 1" in client.command_text("session show")
    result = _finish(
        client, stream, call, {"action": "accept", "content": {"command": "session show"}}, elicitation=elicitation
    )
    assert result["isError"] is False
    assert "pending elicitations: 0" in client.command_text("session show")


def test_sessions_cannot_answer_each_others_elicitations(server):
    """Session B posting an answer to session A's elicitation gets the 400 of an unknown id and
    resolves nothing; A's own answer does."""
    alice = server.session(name="alice")
    bob = server.session(name="bob")
    call, _, stream, elicitation = alice.start_elicitation()
    response = bob.accept(elicitation["id"], {"command": "session show"})
    assert response.status_code == 400, response.text
    assert response.text == bob.accept("zemcp-unknown", {"command": "help"}).text.replace(
        "zemcp-unknown", elicitation["id"]
    )
    stream.wait_comments(1)
    assert "pending elicitations: 1" in alice.command_text("session show")
    assert "pending elicitations: 0" in bob.command_text("session show")
    # Alice's own answer, under her session id, resolves it.
    response = alice.accept(elicitation["id"], {"command": "session show"})
    assert response.status_code == 202
    final = stream.next_message()
    assert final["id"] == call["id"]
    assert final["result"]["isError"] is False
    assert "client: alice" in final["result"]["content"][0]["text"]
    assert stream.next_message() is None


def test_second_answer_after_resolution_is_dropped(client):
    """A repeated answer to an elicitation already answered gets 400 and changes nothing."""
    call, _, stream, elicitation = client.start_elicitation()
    result = _finish(
        client, stream, call, {"action": "accept", "content": {"command": "help"}}, elicitation=elicitation
    )
    assert result["isError"] is False and "server status" in result["content"][0]["text"]
    late = client.accept(elicitation["id"], {"command": "session show"})
    assert late.status_code == 400 and "answered already" in late.json()["error"]["message"]
    assert client.request("ping").status_code == 200


def test_keepalive_comments_while_waiting(client):
    """While an elicitation waits, the stream carries SSE comments at the keep-alive interval (0.5 s here)."""
    call, _, stream, elicitation = client.start_elicitation()
    start = time.monotonic()
    comments = stream.wait_comments(3)
    elapsed = time.monotonic() - start
    assert len(comments) == 3
    assert 0.9 <= elapsed <= 5.0, f"3 keep-alives at a 0.5 s interval took {elapsed:.2f} s"
    result = _finish(
        client, stream, call, {"action": "accept", "content": {"command": "help"}}, elicitation=elicitation
    )
    assert result["isError"] is False


def test_concurrent_elicitations_of_one_session_resolve_independently(client):
    """Two eliciting calls of one session get distinct elicitation ids; each answer resolves only its own call."""
    call_1, _, stream_1, elicitation_1 = client.start_elicitation()
    call_2, _, stream_2, elicitation_2 = client.start_elicitation()
    assert elicitation_1["id"] != elicitation_2["id"]
    assert "pending elicitations: 2" in client.command_text("session show")
    result_2 = _finish(client, stream_2, call_2, {"action": "decline"}, elicitation=elicitation_2)
    assert result_2["isError"] is True and "declin" in result_2["content"][0]["text"]
    result_1 = _finish(
        client,
        stream_1,
        call_1,
        {"action": "accept", "content": {"command": "session show"}},
        elicitation=elicitation_1,
    )
    assert result_1["isError"] is False


def test_sessions_cannot_cancel_each_others_calls(server):
    """notifications/cancelled from session B naming A's tools/call id (ids collide across sessions) leaves A's call running."""
    alice = server.session(name="alice")
    bob = server.session(name="bob")
    call, _, stream, elicitation = alice.start_elicitation()
    response = bob.post(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call["id"], "reason": "not yours"},
        }
    )
    assert response.status_code == 202, response.text
    stream.wait_comments(1)
    assert "pending elicitations: 1" in alice.command_text("session show")
    result = _finish(
        alice, stream, call, {"action": "accept", "content": {"command": "session show"}}, elicitation=elicitation
    )
    assert result["isError"] is False and "client: alice" in result["content"][0]["text"]


def test_concurrent_sessions_each_get_their_own_answer(server):
    """Eight sessions eliciting and answering at the same time each get the result of their own answer."""
    clients = [server.session(name=f"parallel-{n}") for n in range(8)]
    barrier = threading.Barrier(len(clients), timeout=10)
    outcomes = {}

    def flow(n, client):
        try:
            call, _, stream, elicitation = client.start_elicitation()
            barrier.wait()
            response = client.accept(elicitation["id"], {"command": "session show"})
            assert response.status_code == 202, response.text
            final = stream.next_message()
            assert final["id"] == call["id"], final
            assert stream.next_message() is None
            outcomes[n] = final["result"]["content"][0]["text"]
        except BaseException as exc:  # reported by the main thread
            outcomes[n] = exc

    threads = [threading.Thread(target=flow, args=(n, c)) for n, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a flow did not finish in 30 s"
    for n in range(len(clients)):
        outcome = outcomes.get(n)
        assert isinstance(outcome, str), f"flow {n}: {outcome!r}"
        assert f"client: parallel-{n} " in outcome, outcome
