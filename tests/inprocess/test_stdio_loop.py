"""The stdio transport's reading loop in-process (zemcp.cli.stdio.StdioTransport over byte
buffers): the exact line bound, and a failure handling one message that ends nothing."""

import io
import json

import pytest

import zemcp
from zemcp import Settings
from zemcp.cli.stdio import StdioTransport

LIMIT = 200
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "loop", "version": "1"}},
}


def serve(lines: list[bytes], transport_hook=None) -> list[dict]:
    """Serve ``lines`` (each written as given, then the input ends); the messages written."""
    server = zemcp.Server("loop", "1", settings=Settings(max_body_bytes=LIMIT))
    out = io.BytesIO()
    transport = StdioTransport(server, io.BufferedReader(io.BytesIO(b"".join(lines))), out)
    if transport_hook is not None:
        transport_hook(transport)
    transport.serve()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def padded_ping(request_id: int, size: int) -> bytes:
    """A ping of exactly ``size`` bytes, without its newline."""
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": {"pad": ""}}).encode()
    return line.replace(b'"pad": ""', b'"pad": "' + b"x" * (size - len(line)) + b'"')


@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "end of input"])
def test_a_line_of_max_body_bytes_is_served_and_one_byte_more_is_refused(ending):
    at_limit, over = padded_ping(2, LIMIT), padded_ping(3, LIMIT + 1)
    assert len(at_limit) == LIMIT and len(over) == LIMIT + 1
    answers = serve([json.dumps(INIT).encode() + b"\n", at_limit + b"\n", over + b"\n", padded_ping(4, 60) + ending])
    assert [a["id"] for a in answers] == [1, 2, None, 4], answers
    assert answers[1]["result"] == {} and answers[3]["result"] == {}
    assert answers[2]["error"]["code"] == -32600
    assert f"exceeds {LIMIT} bytes" in answers[2]["error"]["message"]


def test_an_unexpected_error_answers_the_request_with_32603_and_reading_goes_on(caplog):
    def broken_prepare(*args, **kwargs):
        raise RuntimeError("a bug")

    def hook(transport):
        transport.server.prepare = broken_prepare

    lines = [
        json.dumps(INIT).encode() + b"\n",
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}\n',
    ]
    answers = serve(lines, hook)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [(1, None), (2, -32603), (3, -32603)]
    assert "the server failed on this request" in answers[1]["error"]["message"]
    assert "handling 'tools/list' failed" in caplog.text and "RuntimeError: a bug" in caplog.text
