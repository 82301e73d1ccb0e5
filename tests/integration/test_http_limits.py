"""Caps on pending elicitations: per session, per process, and the thread budget that keeps answers served."""

import time


def _too_many(client, limit_seconds=2.0):
    """An eliciting call that must fail at once with 'too many pending' as plain JSON."""
    start = time.monotonic()
    response, stream = client.open_stream(client.call_message({}))
    elapsed = time.monotonic() - start
    assert response.status_code == 200
    assert stream is None, "an elicitation refused by a cap must not open a stream"
    assert response.headers["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert text.startswith("Error: elicit: too many pending"), text
    assert elapsed < limit_seconds, f"the refusal took {elapsed:.2f} s"
    return text


def _complete(client, call, stream, elicitation, command="session show"):
    response = client.accept(elicitation["id"], {"command": command})
    assert response.status_code == 202, response.text
    final = stream.next_message()
    assert final["id"] == call["id"] and final["result"]["isError"] is False, final
    assert stream.next_message() is None
    return final["result"]["content"][0]["text"]


def test_per_session_pending_cap(start_server):
    """With ZEMCP_MAX_PENDING_PER_SESSION=1 a second eliciting call of the same session fails at once."""
    server = start_server(max_pending_per_session=1, keepalive_interval=0.5, elicitation_timeout=30)
    alice = server.session(name="alice")
    call, _, stream, elicitation = alice.start_elicitation()
    text = _too_many(alice)
    assert "session" in text.lower(), text
    # The cap is per session: another session may still elicit.
    bob = server.session(name="bob")
    bob_call, _, bob_stream, bob_elicitation = bob.start_elicitation()
    assert bob.status()["pending"] == 2
    assert "client: alice" in _complete(alice, call, stream, elicitation)
    assert "client: bob" in _complete(bob, bob_call, bob_stream, bob_elicitation)
    # The slot is free again.
    call, _, stream, elicitation = alice.start_elicitation()
    _complete(alice, call, stream, elicitation)


def test_process_pending_cap_keeps_a_thread_for_the_answer(start_server):
    """With ZEMCP_MAX_PENDING=1 and 4 threads another session's elicitation fails at once, and answers are still served."""
    server = start_server(max_pending=1, threads=4, keepalive_interval=0.5, elicitation_timeout=30)
    # Two clients (two addresses): the process's cap is under test, not one client's share of it.
    alice = server.session(name="alice", source="127.0.0.2")
    bob = server.session(name="bob", source="127.0.0.3")
    call, _, stream, elicitation = alice.start_elicitation()
    _too_many(bob)
    status = bob.status()
    assert status["pending"] == 1 and status["pending_cap"] == 1, status["text"]
    assert status["threads"] == 4, status["text"]
    assert status["threads_pending"] == 1 and status["threads_reserved"] == 3, status["text"]
    # Several requests while the elicitation holds its thread: all are served.
    for _ in range(5):
        assert bob.request("ping").status_code == 200
    assert "client: alice" in _complete(alice, call, stream, elicitation)
    bob.wait_pending(0)
    bob_call, _, bob_stream, bob_elicitation = bob.start_elicitation()
    assert "client: bob" in _complete(bob, bob_call, bob_stream, bob_elicitation)


def test_derived_budget_refuses_calls_beyond_it_and_answers_still_work(start_server):
    """With ZEMCP_THREADS=4 the call budget is 2: two pending elicitations take it, a third call gets 503 at once, pings and answers are still served."""
    server = start_server(threads=4, keepalive_interval=0.5, elicitation_timeout=30)
    # A client (an address) each: the process's budget is under test, not one client's share of it.
    observer = server.session(name="observer", source="127.0.0.2")
    status = observer.status()
    assert status["threads"] == 4, status["text"]
    cap = status["pending_cap"]
    assert cap == 2 and status["threads_pending"] == cap and status["threads_reserved"] == 4 - cap, status["text"]
    waiting = []
    for n in range(cap):
        client = server.session(name=f"waiter-{n}", source=f"127.0.0.{10 + n}")
        waiting.append((client, *client.start_elicitation()))
    start = time.monotonic()
    refused = observer.request("tools/call", {"name": "ze_execute", "arguments": {"command": "help"}})
    assert time.monotonic() - start < 2.0
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "2", (refused.status_code, refused.text)
    error = refused.json()["error"]
    assert error["code"] == -32603 and "Service Unavailable: 2 running calls" in error["message"], error
    # Every pending elicitation holds a thread; the answers and other requests still get one.
    for _ in range(3):
        assert observer.request("ping").status_code == 200
    for n, (client, call, _, stream, elicitation) in enumerate(waiting):
        assert f"client: waiter-{n}" in _complete(client, call, stream, elicitation)
    observer.wait_pending(0)
