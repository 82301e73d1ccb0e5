"""Budgets and what reaches the log, in-process: fair per-session shares, the call budget in
both eras, random elicitation ids, no elicited content in the log, and a single-threaded server."""

from __future__ import annotations

import json
import logging
import re

from werkzeug import test as werkzeug_test

import zemcp
from tests.inprocess.test_transport import HEADERS, Peer, events
from tests.support.threaded import Client
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


def start(peer: Peer, name: str = "ask_pin"):
    _, response = peer.call(name, {}, buffered=False)
    frames = events(response)
    return response, frames, next(frames)


def test_a_malformed_answer_is_not_written_to_the_log(caplog):
    """An answer that fails the schema reaches the handler as ElicitMalformed; the log names the outcome, not the answer."""
    app, _ = make_app(threads=8)
    peer = Peer(app)
    response, frames, ask = start(peer)
    with caplog.at_level(logging.INFO, logger="zemcp"):
        assert peer.answer(ask["id"], {"action": "accept", "content": {"pin": "SECRET-PIN-9876"}}).status_code == 202
        final = [f for f in frames if f != "keep-alive"][-1]
    assert final["result"]["isError"] is True
    assert "SECRET-PIN-9876" not in caplog.text
    assert "ElicitMalformed" in caplog.text
    response.close()


def test_elicitation_ids_are_random():
    """Two requests to the client get unrelated random ids, not a process-wide count."""
    app, _ = make_app(threads=8)
    ids = []
    for _ in range(2):
        peer = Peer(app)
        response, _, ask = start(peer)
        ids.append(ask["id"])
        response.close()
    assert all(re.fullmatch(r"zemcp-[A-Za-z0-9_-]{16}", i) for i in ids), ids
    assert ids[0] != ids[1]


def test_one_session_gets_at_most_half_the_pending_budget():
    """With 8 threads (pending budget 4) one session may hold 2 pending elicitations; another still gets one."""
    app, server = make_app(threads=8)
    assert (server.settings.pending_budget, server.settings.session_pending_budget) == (4, 2)
    greedy = Peer(app)
    held = [start(greedy) for _ in range(2)]
    _, third = greedy.call("ask_pin", {})
    assert "per-session cap" in third.get_json()["result"]["content"][0]["text"]
    other_response, _, _ = start(Peer(app))
    for response, _, _ in [*held, (other_response, None, None)]:
        response.close()


def test_the_call_budget_refuses_with_503_in_both_eras():
    """Running calls that hold the call budget make the next call of either era 503 with Retry-After; ping still works."""
    app, server = make_app(threads=4)
    assert server.settings.call_budget == 2
    held = [start(Peer(app)) for _ in range(2)]
    peer = Peer(app)
    _, busy = peer.call("hello", {})
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "2"
    assert "Service Unavailable" in busy.get_json()["error"]["message"]
    modern = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {
            "name": "hello",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    r = Client(app).post(
        "/mcp",
        data=json.dumps(modern),
        headers={**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "hello"},
    )
    assert r.status_code == 503 and r.get_json()["error"]["code"] == -32603
    assert peer.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}).status_code == 200
    for response, _, _ in held:
        response.close()


def test_a_single_threaded_server_refuses_to_wait(caplog):
    """Under a server that is not multithreaded a session's elicitation fails at once with CannotWait; a warning names the fix."""
    app, _ = make_app(threads=8)
    plain = werkzeug_test.Client(app)
    with caplog.at_level(logging.WARNING, logger="zemcp"):
        init = plain.post(
            "/mcp",
            headers=HEADERS,
            data=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "single", "version": "1"},
                    },
                }
            ),
        )
    assert "wsgi.multithread is false" in caplog.text
    sid = init.headers["Mcp-Session-Id"]
    r = plain.post(
        "/mcp",
        headers={**HEADERS, "Mcp-Session-Id": sid},
        data=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask_pin", "arguments": {}}}
        ),
    )
    result = r.get_json()["result"]
    assert r.mimetype == "application/json" and result["isError"] is True
    assert "serves one request at a time" in result["content"][0]["text"]
