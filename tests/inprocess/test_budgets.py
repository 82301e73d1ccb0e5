"""Budgets and what reaches the log, in-process: fair per-session shares, the call budget in
both eras, random elicitation ids, no elicited content in the log, and a single-threaded server."""

from __future__ import annotations

import logging
import re

import zemcp
from tests.support.clients import HandshakeClient, ModernClient, inprocess_session
from tests.support.wires import InProcessWire
from zemcp import Settings

PIN = {"type": "object", "properties": {"pin": {"type": "string", "maxLength": 4}}, "required": ["pin"]}


def make_app(**settings):
    # Every werkzeug test client comes from one address: the process's budgets are under test
    # here, each client's share of them in tests/unit/test_fair_shares.py.
    settings.setdefault("client_share", 1)
    server = zemcp.Server("budgets", settings=Settings(keepalive_interval=0.05, elicitation_timeout=5, **settings))

    @server.tool
    def ask_pin(ctx: zemcp.Context) -> str:
        """Asks for a PIN and lets every elicitation outcome propagate."""
        return ctx.elicit("PIN?", PIN)["pin"]

    @server.tool
    def hello() -> str:
        return "hello"

    return zemcp.McpApp(server), server


def start(peer: HandshakeClient, name: str = "ask_pin"):
    _, response, frames = peer.open_call(name, {})
    return response, frames, frames.next_message()


def test_a_malformed_answer_is_not_written_to_the_log(caplog):
    """An answer that fails the schema reaches the handler as ElicitMalformed; the log names the outcome, not the answer."""
    app, _ = make_app(threads=8)
    peer = inprocess_session(app)
    response, frames, ask = start(peer)
    with caplog.at_level(logging.INFO, logger="zemcp"):
        assert peer.answer(ask["id"], {"action": "accept", "content": {"pin": "SECRET-PIN-9876"}}).status_code == 202
        final = frames.rest()[-1]
    assert final["result"]["isError"] is True
    assert "SECRET-PIN-9876" not in caplog.text
    assert "ElicitMalformed" in caplog.text
    response.close()


def test_elicitation_ids_are_random():
    """Two requests to the client get unrelated random ids, not a process-wide count."""
    app, _ = make_app(threads=8)
    ids = []
    for _ in range(2):
        peer = inprocess_session(app)
        response, _, ask = start(peer)
        ids.append(ask["id"])
        response.close()
    assert all(re.fullmatch(r"zemcp-[A-Za-z0-9_-]{16}", i) for i in ids), ids
    assert ids[0] != ids[1]


def test_one_session_gets_at_most_half_the_pending_budget():
    """With 8 threads (pending budget 4) one session may hold 2 pending elicitations; another still gets one."""
    app, server = make_app(threads=8)
    assert (server.settings.pending_budget, server.settings.session_pending_budget) == (4, 2)
    greedy = inprocess_session(app)
    held = [start(greedy) for _ in range(2)]
    _, third = greedy.call_tool("ask_pin", {})
    assert "per-session cap" in third.get_json()["result"]["content"][0]["text"]
    other_response, _, _ = start(inprocess_session(app))
    for response, _, _ in [*held, (other_response, None, None)]:
        response.close()


def test_the_call_budget_refuses_with_503_in_both_eras():
    """Running calls that hold the call budget make the next call of either era 503 with Retry-After; ping still works."""
    app, server = make_app(threads=4)
    assert server.settings.call_budget == 2
    held = [start(inprocess_session(app)) for _ in range(2)]
    peer = inprocess_session(app)
    _, busy = peer.call_tool("hello", {})
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "2"
    assert "Service Unavailable" in busy.get_json()["error"]["message"]
    _, r = ModernClient(InProcessWire(app), capabilities={}).call_tool("hello", {})
    assert r.status_code == 503 and r.get_json()["error"]["code"] == -32603
    assert peer.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}).status_code == 200
    for response, _, _ in held:
        response.close()


def test_a_single_threaded_server_refuses_to_wait(caplog):
    """Under a server that is not multithreaded a session's elicitation fails at once with CannotWait; a warning names the fix."""
    app, _ = make_app(threads=8)
    client = HandshakeClient(InProcessWire(app, multithread=False), "single", "1")
    with caplog.at_level(logging.WARNING, logger="zemcp"):
        client.initialize(initialized=False)
    assert "wsgi.multithread is false" in caplog.text
    _, r = client.call_tool("ask_pin", {})
    result = r.get_json()["result"]
    assert r.mimetype == "application/json" and result["isError"] is True
    assert "serves one request at a time" in result["content"][0]["text"]
