"""Clients that shut down their sending side after their request (HTTP/1.1 allows a half-close).

Their socket reads as ended, as a closed connection's does; zemcp must still write them the
whole response, and tell them from clients that really left only by a failed write or a reset.
Each test speaks raw HTTP on a socket it half-closes right after its request.
"""

from __future__ import annotations

import json
import socket
import time

import requests

from tests.support.clients import ACCEPT, ModernClient
from tests.support.net import HOST

STREAMS_APP = "tests.apps.streams:app"
#: [seconds] long enough for several looks at the socket (each second, or each keep-alive interval).
QUIET = 2.5
#: [seconds] how soon a client that closed for good must be noticed (two looks, and some slack).
RELEASE_LIMIT = 6.0


class HalfClosed:
    """One POST on a raw connection whose sending side is shut right after it; the response read as it comes."""

    def __init__(self, port: int, message: dict, headers: dict):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        body = json.dumps(message).encode()
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: {HOST}:{port}",
            "Content-Type: application/json",
            f"Accept: {ACCEPT}",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        self.sock.shutdown(socket.SHUT_WR)
        self._buffer = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        self.headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.decode().partition(":") for line in head.split(b"\r\n")[1:])
        }
        self.ended = False

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"the connection ended early, after {self._buffer!r}"
        self._buffer += chunk

    def _until(self, mark: bytes) -> bytes:
        while mark not in self._buffer:
            self._more()
        data, _, self._buffer = self._buffer.partition(mark)
        return data

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._more()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def body(self) -> bytes:
        """The whole body of a response with a Content-Length."""
        return self._exactly(int(self.headers["content-length"]))

    def chunks(self):
        """The chunks of a chunked body, as they arrive, until the last one."""
        while True:
            size = int(self._until(b"\r\n"), 16)
            if size == 0:
                self.ended = True
                return
            chunk = self._exactly(size)
            self._exactly(2)
            yield chunk

    def messages(self):
        """The JSON-RPC messages of an event stream, as they arrive."""
        pending = b""
        for chunk in self.chunks():
            pending += chunk
            while b"\n\n" in pending:
                event, _, pending = pending.partition(b"\n\n")
                for line in event.split(b"\n"):
                    if line.startswith(b"data: ") and line[6:].strip():
                        yield json.loads(line[6:])

    def close(self) -> None:
        self.sock.close()


def _call(name: str, arguments: dict, request_id: int = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_a_half_closed_session_call_gets_its_elicitation_and_its_result(start_server):
    """A pending elicitation's stream, half-closed by its client, stays its own through quiet
    seconds; the answer POSTed elsewhere resumes the call, whose result arrives on it."""
    server = start_server(STREAMS_APP, keepalive_interval=0.5)
    client = server.session()
    session = {"Mcp-Session-Id": client.session_id, "MCP-Protocol-Version": client.protocol_version}
    call = HalfClosed(server.port, _call("ask", {}), session)
    try:
        assert call.status == 200 and call.headers["content-type"].startswith("text/event-stream")
        messages = call.messages()
        ask = next(messages)
        assert ask["method"] == "elicitation/create", ask
        time.sleep(QUIET)
        assert client.accept(ask["id"], {"word": "half"}).status_code == 202
        final = next(messages)
        assert final["id"] == 1 and final["result"]["content"][0]["text"] == "word: half", final
    finally:
        call.close()


def test_a_half_closed_plain_call_gets_its_result(start_server):
    """A call answered with one JSON body reaches a client that half-closed after its POST."""
    server = start_server(STREAMS_APP)
    client = server.session()
    session = {"Mcp-Session-Id": client.session_id, "MCP-Protocol-Version": client.protocol_version}
    call = HalfClosed(server.port, _call("talk", {"count": 2, "delay": 0.01}), session)
    try:
        assert call.status == 200
        if call.headers["content-type"].startswith("text/event-stream"):
            final = list(call.messages())[-1]
        else:
            final = json.loads(call.body())
        assert final["result"]["content"][0]["text"] == "talked 2 times", final
    finally:
        call.close()


def test_a_half_closed_listen_stream_stays_open_and_a_closed_one_is_noticed(start_server):
    """2026-07-28: a listen stream half-closed by its client gets keep-alives and notifications
    after quiet seconds; one whose client closed gives its only slot back."""
    server = start_server(STREAMS_APP, keepalive_interval=0.5, max_listen_streams=1)
    modern = ModernClient(server.url)
    message = modern.message("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    listen = HalfClosed(server.port, message, {k: v for k, v in modern.headers(message).items() if k.startswith("M")})
    try:
        assert listen.status == 200
        messages = listen.messages()
        assert next(messages)["method"] == "notifications/subscriptions/acknowledged"
        time.sleep(QUIET)
        assert modern.call_result({}, name="add_tool")["content"]
        assert next(messages)["method"] == "notifications/tools/list_changed"
    finally:
        listen.close()
    # Closed for good now: a probe finds the reset, and the only slot comes back.
    closed = time.monotonic()
    while True:
        message = modern.message("subscriptions/listen", {"notifications": {}})
        with requests.post(modern.url, json=message, headers=modern.headers(message), stream=True, timeout=5) as again:
            if again.status_code == 200:
                break
            assert again.status_code == 429, again.status_code
        assert time.monotonic() - closed < RELEASE_LIMIT, "the closed listen stream still holds its slot"
        time.sleep(0.2)
