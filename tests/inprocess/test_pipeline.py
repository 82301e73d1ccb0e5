"""The request pipeline (zemcp/pipeline): one chain of layers around both eras, over HTTP and stdio.

A layer added to ``zemcp.pipeline.LAYERS`` meets every message of both eras over both
transports, with the transport's context, and hears when a running call ends; the audit layer
records each use of a tool, refused ones included.
"""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar

import pytest

import zemcp
import zemcp.pipeline
from tests.support.clients import CLIENT_VERSION, LATEST_VERSION, MODERN_VERSION, inprocess_modern, inprocess_session
from zemcp import Settings
from zemcp.cli.stdio import StdioTransport
from zemcp.eras.requestcontext import Running

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": LATEST_VERSION, "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}},
}


def make_server(**settings: Any) -> zemcp.Server:
    server = zemcp.Server("pipeline", "1", settings=Settings(**settings))

    @server.tool
    def hello(ctx: zemcp.Context) -> str:
        """Greets; takes a context, so it runs as a call."""
        return "hi"

    @server.tool
    def plain() -> str:
        """Greets without a context."""
        return "plain"

    return server


def handshake_calls(app: zemcp.McpApp, *tools: str) -> list[dict[str, Any]]:
    """Initialize a session in process (no notifications/initialized), then call each of
    ``tools``; their JSON bodies."""
    client = inprocess_session(app, remote_addr="127.0.0.1", capabilities={}, initialized=False)
    return [client.wire.json(client.call_tool(tool)[1]) for tool in tools]


def modern_call(app: zemcp.McpApp, tool: str) -> dict[str, Any]:
    """One 2026-07-28 tools/call of ``tool`` in process; its JSON body."""
    client = inprocess_modern(app, remote_addr="127.0.0.1")
    return client.wire.json(client.call_tool(tool)[1])


def stdio_calls(server: zemcp.Server, *tools: str) -> list[dict[str, Any]]:
    """Initialize over stdio, call each of ``tools``, end the input; every message written."""
    lines = [json.dumps(INIT)]
    lines += [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": t, "arguments": {}}})
        for i, t in enumerate(tools, 1)
    ]
    out = io.BytesIO()
    StdioTransport(server, io.BufferedReader(io.BytesIO("\n".join(lines).encode() + b"\n")), out).serve()
    return [json.loads(line) for line in out.getvalue().splitlines()]


class Recorder:
    """A layer that records what it sees: each message's method, transport and outcome, and the
    responses of the running calls it hears end."""

    seen: ClassVar[list[tuple[str, str, str]]] = []
    ended: ClassVar[list[Any]] = []

    def __init__(self, server: zemcp.Server, next: Any):
        self._next = next

    def __call__(self, message: Any, context: Any) -> Any:
        context.on_finish(lambda response: Recorder.ended.append(response["id"] if response else None))
        outcome = self._next(message, context)
        kind = "running" if isinstance(outcome, Running) else type(outcome).__name__
        Recorder.seen.append((getattr(message, "method", "answer"), context.transport, kind))
        return outcome


@pytest.fixture
def recorder(monkeypatch):
    """A Recorder added as the innermost layer, for the pipelines built while the test runs."""
    Recorder.seen, Recorder.ended = [], []
    monkeypatch.setattr(zemcp.pipeline, "LAYERS", (*zemcp.pipeline.LAYERS, Recorder))
    return Recorder


def test_one_added_layer_meets_both_eras_over_both_transports(recorder):
    server = make_server()
    app = zemcp.McpApp(server)
    (called,) = handshake_calls(app, "hello")
    assert called["result"]["content"][0]["text"] == "hi"
    assert modern_call(app, "hello")["result"]["content"][0]["text"] == "hi"
    answers = stdio_calls(server, "hello")
    assert [a["id"] for a in answers] == [0, 1]
    assert recorder.seen == [
        ("initialize", "tcp", "dict"),
        ("tools/call", "tcp", "running"),
        ("tools/call", "tcp", "running"),
        ("initialize", "pipe", "dict"),
        ("tools/call", "pipe", "running"),
    ]
    # Each running call was heard to end, with the response its client got.
    assert len(recorder.ended) == 3 and None not in recorder.ended, recorder.ended


def test_the_audit_log_records_each_use_with_its_outcome_in_both_eras_and_over_stdio(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    server = make_server(audit_log=True)
    app = zemcp.McpApp(server)
    handshake_calls(app, "hello", "missing")
    modern_call(app, "plain")
    stdio_calls(server, "hello")
    records = [r for r in caplog.records if r.name == "zemcp.audit"]
    http = "address 127.0.0.1"
    assert [(r.method, r.tool, r.outcome, r.reason, r.client, r.protocol_version) for r in records] == [
        ("tools/call", "hello", "ok", None, http, CLIENT_VERSION),
        ("tools/call", "missing", "error", "-32602", http, CLIENT_VERSION),
        ("tools/call", "plain", "ok", None, http, MODERN_VERSION),
        ("tools/call", "hello", "ok", None, None, LATEST_VERSION),
    ]
    assert all(r.event == "audit" and r.subject is None and r.duration >= 0 for r in records)
    assert (
        records[0].getMessage().startswith(f"tools/call 'hello' by 'address 127.0.0.1' over {CLIENT_VERSION}: ok in ")
    )
    assert records[3].getMessage().startswith(f"tools/call 'hello' by the stdio client over {LATEST_VERSION}: ok in ")


def test_the_audit_log_is_off_by_default(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    handshake_calls(zemcp.McpApp(make_server()), "hello")
    assert not [r for r in caplog.records if r.name == "zemcp.audit"]
